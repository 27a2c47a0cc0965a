#include "runtime/devices.h"

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "lazycl/error.h"
#include "runtime/profile.h"

namespace lazycl::runtime {

namespace {

std::mutex& DevicesMutex() {
  static auto* mutex = new std::mutex();
  return *mutex;
}

std::map<int, backend::Device*>& Devices() {
  static auto* devices = new std::map<int, backend::Device*>();  // never destroyed: see header
  return *devices;
}

}  // namespace

backend::Device& OpenClDevice(int index) {
  static std::mutex& mutex = DevicesMutex();
  static std::map<int, backend::Device*>* devices = &Devices();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = devices->find(index);
  if (it != devices->end()) return *it->second;
  absl::StatusOr<std::unique_ptr<backend::Device>> device =
      backend::Device::Open(base::CurrentSettings(), index);
  if (!device.ok()) {
    base::Throw(absl::Status(
        device.status().code(),
        absl::StrCat("cannot open OpenCL device cl:", index, ": ", device.status().message())));
  }
  backend::Device* raw = device->release();
  (*devices)[index] = raw;
  // Registered after the driver is up, so that it runs before the driver's own teardown: a
  // scan returns with its steps queued (runtime/step_loop.cpp), and no kernel may still run
  // while exit() destroys what it uses.
  static std::once_flag drain_at_exit;
  std::call_once(drain_at_exit, [] {
    std::atexit([] { ForEachOpenDevice([](int, backend::Device& d) { (void)d.Finish(); }); });
  });
  profile::OnDeviceOpened(index, *raw);
  return *raw;
}

void ForEachOpenDevice(const std::function<void(int, backend::Device&)>& fn) {
  std::vector<std::pair<int, backend::Device*>> open;
  {
    std::lock_guard<std::mutex> lock(DevicesMutex());
    open.assign(Devices().begin(), Devices().end());
  }
  for (auto& [index, device] : open) fn(index, *device);
}

void EmptyPools() {
  std::lock_guard<std::mutex> lock(DevicesMutex());
  for (auto& [index, device] : Devices()) device->buffers().TrimPool();
}

}  // namespace lazycl::runtime
