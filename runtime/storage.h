#pragma once

#include <cstddef>
#include <string>

#include "backend/buffer_manager.h"
#include "lazycl/device.h"
#include "lazycl/dtype.h"

namespace lazycl::ir {

// The data of a Buffer leaf: one buffer in the BufferManager of its device. A Storage owns its
// buffer and releases it when the last reference goes. A placeholder is a Storage whose buffer
// is declared and never written: it holds no memory, ever.
class Storage {
 public:
  Storage(Device device, backend::BufferManager* manager, size_t bytes, std::string label,
          bool placeholder = false);
  // A buffer whose bytes wait in `source` until first read (BufferManager::Declare): a lazily
  // loaded checkpoint tensor. It holds data, so it is no placeholder.
  Storage(Device device, backend::BufferManager* manager, size_t bytes, std::string label,
          backend::HostSource source);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  Device device() const { return device_; }
  backend::BufferManager& manager() const { return *manager_; }
  backend::BufferId id() const { return id_; }
  size_t bytes() const { return bytes_; }
  bool placeholder() const { return placeholder_; }

 private:
  Device device_;
  backend::BufferManager* manager_;
  backend::BufferId id_;
  size_t bytes_;
  bool placeholder_;
};

}  // namespace lazycl::ir
