// LC_PREFETCH(p): a hint that the cache line at p will be read soon. The CPU matmul
// (matmul_cpu.cl) and its generated epilogue's lc_prefetch16 use it; emit_matmul.cpp puts this
// text before both.
#if defined(__has_builtin)
#if __has_builtin(__builtin_prefetch)
#define LC_PREFETCH(p) __builtin_prefetch(p)
#endif
#endif
#ifndef LC_PREFETCH
#define LC_PREFETCH(p) prefetch(p, 1)
#endif
