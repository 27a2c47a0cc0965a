#include "runtime/storage.h"

#include <utility>

namespace lazycl::ir {

Storage::Storage(Device device, backend::BufferManager* manager, size_t bytes, std::string label,
                 bool placeholder)
    : device_(device),
      manager_(manager),
      id_(manager->Declare(bytes, std::move(label))),
      bytes_(bytes),
      placeholder_(placeholder) {}

Storage::Storage(Device device, backend::BufferManager* manager, size_t bytes, std::string label,
                 backend::HostSource source)
    : device_(device),
      manager_(manager),
      id_(manager->Declare(bytes, std::move(label), std::move(source))),
      bytes_(bytes),
      placeholder_(false) {}

Storage::~Storage() { manager_->Release(id_); }

}  // namespace lazycl::ir
