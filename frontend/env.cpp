#include "lazycl/env.h"

namespace lazycl {
namespace {
thread_local Env* current = nullptr;
}  // namespace

Env& default_env() {
  static Env* env = new Env(Device::opencl(0));  // never destroyed: guards may outlive main()
  return *env;
}

EnvGuard::EnvGuard(Env& env) : previous_(current) { current = &env; }
EnvGuard::~EnvGuard() { current = previous_; }

Env* current_env() { return current; }

Device default_device() {
  const Env* env = current;
  if (env == nullptr || env->config().use_host_for_cpu_tensors) return Device::host();
  return env->device();
}

}  // namespace lazycl
