// LC_PREFETCH(p): a hint that the cache line at p will be read soon. The CPU matmul
// (matmul_cpu.cl) and its generated epilogue's lc_prefetch16 use it; emit_matmul.cpp puts this
// text before both. clang's __builtin_prefetch takes a generic pointer, which a __global one
// converts to only where the compiler has one: PoCL compiles as OpenCL C 3.0 by default and
// accepts it; NVIDIA compiles as 1.2 (no -cl-std is passed) and rejects it as a build error
// ("changes address space of pointer"), so there OpenCL's own prefetch is used.
#if defined(__has_builtin) && __OPENCL_C_VERSION__ >= 200
#if __has_builtin(__builtin_prefetch)
#define LC_PREFETCH(p) __builtin_prefetch(p)
#endif
#endif
#ifndef LC_PREFETCH
#define LC_PREFETCH(p) prefetch(p, 1)
#endif
