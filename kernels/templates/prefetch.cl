// LC_PREFETCH(p): a hint that the cache line at p will be read soon. The CPU matmul
// (matmul_cpu.cl) and its generated epilogue's lc_prefetch16 use it; emit_matmul.cpp puts this
// text before both. clang's __builtin_prefetch, where the kernel compiles to the host's
// instructions (PoCL's CPU devices define the host's architecture macros), emits a prefetch;
// elsewhere it may not build at all: NVIDIA's compiler rejects a __global pointer where the
// builtin takes a generic one ("changes address space of pointer", seen on an H200; the build
// still failed there when the builtin was kept for __OPENCL_C_VERSION__ >= 200, its log not
// kept), so there OpenCL's own prefetch is used.
#if defined(__has_builtin) && (defined(__x86_64__) || defined(__i386__) || \
                               defined(__aarch64__) || defined(__riscv) || defined(__powerpc64__))
#if __has_builtin(__builtin_prefetch)
#define LC_PREFETCH(p) __builtin_prefetch(p)
#endif
#endif
#ifndef LC_PREFETCH
#define LC_PREFETCH(p) prefetch(p, 1)
#endif
