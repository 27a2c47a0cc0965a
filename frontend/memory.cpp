#include "lazycl/memory.h"

#include <cstdlib>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backend/device.h"
#include "base/status.h"
#include "runtime/devices.h"

namespace lazycl {

void empty_cache() { runtime::EmptyPools(); }

struct PinnedBuffer::Impl {
  Device device = Device::host();
  size_t size = 0;
  std::unique_ptr<backend::PinnedHostMemory> pinned;  // an OpenCL device's
  void* host = nullptr;                               // Device::host()'s (std::free)
  ~Impl() { std::free(host); }
};

PinnedBuffer::PinnedBuffer(size_t bytes, Device device) : impl_(std::make_unique<Impl>()) {
  impl_->device = device;
  impl_->size = bytes;
  if (device.is_host()) {
    if (bytes > std::numeric_limits<size_t>::max() - 63) {
      base::Throw(absl::ResourceExhaustedError(
          absl::StrCat("PinnedBuffer: ", bytes, " bytes of host memory cannot be allocated")));
    }
    const size_t rounded = (bytes + 63) / 64 * 64;
    impl_->host = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (impl_->host == nullptr) {
      base::Throw(absl::ResourceExhaustedError(
          absl::StrCat("PinnedBuffer: could not allocate ", bytes, " bytes of host memory")));
    }
    return;
  }
  absl::StatusOr<std::unique_ptr<backend::PinnedHostMemory>> pinned =
      runtime::OpenClDevice(device.index()).AllocatePinned(bytes);
  if (!pinned.ok()) {
    base::Throw(absl::Status(pinned.status().code(),
                             absl::StrCat("PinnedBuffer(", bytes, ", ", device.str(),
                                          "): ", pinned.status().message())));
  }
  impl_->pinned = std::move(*pinned);
}

PinnedBuffer::~PinnedBuffer() = default;
PinnedBuffer::PinnedBuffer(PinnedBuffer&&) noexcept = default;
PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&&) noexcept = default;

void* PinnedBuffer::data() const {
  if (impl_ == nullptr) return nullptr;
  return impl_->pinned != nullptr ? impl_->pinned->data() : impl_->host;
}

size_t PinnedBuffer::size() const { return impl_ == nullptr ? 0 : impl_->size; }

Device PinnedBuffer::device() const { return impl_ == nullptr ? Device::host() : impl_->device; }

}  // namespace lazycl
