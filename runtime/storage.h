#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "backend/buffer_manager.h"
#include "lazycl/device.h"
#include "lazycl/dtype.h"

namespace lazycl::ir {

struct Node;
class Storage;

// Deferred work that writes storages when one of them is first read: a device scan's run
// (frontend/scan.cpp) or a traced Function's call (frontend/function.cpp), declared with its
// results when it returns and run only when a graph, a read or other deferred work needs one of
// them. One Producer writes several storages (a scan's final
// carries and stacked ys). The first reader runs it; readers on other threads wait for that run;
// every reader gets its status, so a failed run fails every later read with the same error.
class Producer {
 public:
  // `depth`: 1 + the largest depth among the producers its work will run first (those whose
  // results it reads); callers bound it, so that running a chain recurses a bounded number of
  // levels (frontend/deferred.h runs the pending work it reads at once past kMaxPendingProducers).
  Producer(std::function<absl::Status()> run, int depth) : run_(std::move(run)), depth_(depth) {}
  Producer(const Producer&) = delete;
  Producer& operator=(const Producer&) = delete;

  // Runs the work once and releases it (and what it holds: the inputs' graphs); later calls
  // return the first run's status.
  absl::Status Run();
  // Whether the work has run and succeeded: its storages are written (or being written by
  // commands already queued, which later commands queue behind).
  bool succeeded() const { return succeeded_.load(std::memory_order_acquire); }
  int depth() const { return depth_; }

  // A device scan whose last step its reader may compute (frontend/scan.cpp): for one storage
  // the work writes (a final carry), that value as a pending graph: the last step's body on the
  // carries of the steps before it, which are deferred work of their own. A graph that reads
  // only part of the value computes only that part of the last step (runtime/executor.cpp: a
  // language model's next token needs the last layer for one position). Set before the
  // storages are shared; released with the work when it runs.
  using LastStep = std::function<absl::StatusOr<std::shared_ptr<const Node>>(const Storage&)>;
  void set_last_step(LastStep last_step) {
    has_last_step_.store(last_step != nullptr, std::memory_order_release);
    last_step_ = std::move(last_step);
  }
  // That graph for `storage`; null where there is none (no such step, or the work has run).
  absl::StatusOr<std::shared_ptr<const Node>> LastStepOf(const Storage& storage);
  bool has_last_step() const { return has_last_step_.load(std::memory_order_acquire); }

 private:
  std::mutex mu_;
  std::function<absl::Status()> run_;
  LastStep last_step_;
  std::atomic<bool> has_last_step_{false};
  std::optional<absl::Status> status_;
  std::atomic<bool> succeeded_{false};
  const int depth_;
};

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

  // The Producer that writes this storage when first read (set once, before the storage is
  // shared); pending() until it has run and succeeded (a failed run stays pending: every read
  // gets its error). Produce() runs it if it has not run and returns its status. Whoever reads a
  // storage's bytes or binds it to a kernel asks pending() first, before IsWritten (a run under
  // way on another thread has written some steps already): RunGraph and the step loop for their
  // leaves, the frontend for reads and writes from the host.
  void set_producer(std::shared_ptr<Producer> producer) { producer_ = std::move(producer); }
  bool pending() const { return producer_ != nullptr && !producer_->succeeded(); }
  // The depth of its Producer while pending (Producer::depth), else 0.
  int pending_depth() const { return pending() ? producer_->depth() : 0; }
  absl::Status Produce() const {
    return producer_ == nullptr ? absl::OkStatus() : producer_->Run();
  }
  // While pending: its value as a pending graph of its producer's last step
  // (Producer::LastStepOf), or null.
  bool has_last_step() const { return pending() && producer_->has_last_step(); }
  absl::StatusOr<std::shared_ptr<const Node>> LastStep() const {
    if (!pending()) return std::shared_ptr<const Node>();
    return producer_->LastStepOf(*this);
  }

 private:
  Device device_;
  backend::BufferManager* manager_;
  backend::BufferId id_;
  size_t bytes_;
  bool placeholder_;
  std::shared_ptr<Producer> producer_;
};

}  // namespace lazycl::ir
