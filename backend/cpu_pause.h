#pragma once

namespace lazycl::backend {

// One spin-wait hint (x86 `pause`, Arm `yield`): a polling loop runs it between polls, so that
// it gives way to the core's other hardware thread and uses less power.
inline void CpuPause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace lazycl::backend
