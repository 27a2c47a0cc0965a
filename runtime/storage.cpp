#include "runtime/storage.h"

#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"

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

absl::Status Producer::Run() {
  if (succeeded()) return absl::OkStatus();
  std::function<absl::Status()> run;  // released after the lock: dropping graphs can take long
  LastStep last_step;
  std::lock_guard<std::mutex> lock(mu_);
  if (!status_.has_value()) {
    run = std::exchange(run_, nullptr);
    last_step = std::exchange(last_step_, nullptr);
    has_last_step_.store(false, std::memory_order_release);
    try {
      status_ = run ? run() : absl::InternalError("a deferred computation has no work to run");
    } catch (const std::exception& e) {
      status_ = absl::InternalError(absl::StrCat("a deferred computation failed: ", e.what()));
    }
    succeeded_.store(status_->ok(), std::memory_order_release);
  }
  return *status_;
}

absl::StatusOr<std::shared_ptr<const Node>> Producer::LastStepOf(const Storage& storage) {
  std::lock_guard<std::mutex> lock(mu_);
  if (status_.has_value() || !last_step_) return std::shared_ptr<const Node>();
  try {
    return last_step_(storage);
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("a deferred computation's last step failed: ", e.what()));
  }
}

Storage::~Storage() { manager_->Release(id_); }

}  // namespace lazycl::ir
