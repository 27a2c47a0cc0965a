#pragma once

#include "lazycl/device.h"

// The environment that decides where new tensors live: host tensors (eager, no OpenCL) or
// tensors on an OpenCL device (lazy), as torchax's default_env() does.
namespace lazycl {

struct Config {
  // While true, factories without an explicit device make host ("native") tensors even inside
  // an EnvGuard, because small CPU work is faster without OpenCL. Set it to false to make every
  // factory in the guard produce tensors on Env::device().
  bool use_host_for_cpu_tensors = true;
};

class Env {
 public:
  explicit Env(Device device = Device::opencl(0)) : device_(device) {}
  Config& config() { return config_; }
  const Config& config() const { return config_; }
  Device device() const { return device_; }
  void set_device(Device device) { device_ = device; }

 private:
  Config config_;
  Device device_;
};

Env& default_env();

// RAII "with env:". Guards nest; the innermost one on this thread is current.
class EnvGuard {
 public:
  explicit EnvGuard(Env& env);
  ~EnvGuard();
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

 private:
  Env* previous_;
};

// The Env of the innermost EnvGuard on this thread, or nullptr outside any guard.
Env* current_env();

// The device a factory without an explicit device uses now.
Device default_device();

}  // namespace lazycl
