#pragma once

#include <atomic>
#include <cstddef>
#include <new>

// An allocator for objects made and dropped by the hundred per step of a loop (IR nodes: a
// sampling loop builds and tears down ~900 a token): each thread keeps the blocks it frees, up
// to kMaxKept of each size, and reuses them for its next objects of that size. glibc's malloc
// keeps 7 blocks of a size per thread (tcache); past that a block is coalesced with its
// neighbours as it is freed and split again as it is taken, several hundred instructions each.
// A block freed on another thread than the one that took it joins that thread's list. Under
// AddressSanitizer every block goes back to operator new and delete, so that a use after free
// is still found.
namespace lazycl::base {

template <size_t Size, size_t Align>
class BlockPool {
 public:
  static constexpr size_t kMaxKept = 1024;

  static void* Allocate() {
#ifndef __SANITIZE_ADDRESS__
    Kept& kept = kept_;  // one look-up of the thread's state per call
    if (kept.head != nullptr) {
      Free* block = kept.head;
      kept.head = block->next;
      --kept.count;
      return block;
    }
#endif
    return ::operator new (Size, std::align_val_t{Align});
  }

  // The blocks this thread keeps now, and those every thread gave back as it ended (for tests).
  static size_t KeptHere() { return kept_.count; }
  static size_t GivenBackAtExit() { return given_back_.load(std::memory_order_relaxed); }

  static void Deallocate(void* p) {
#ifndef __SANITIZE_ADDRESS__
    Kept& kept = kept_;
    if (kept.count < kMaxKept && !kept.gone) {
      if (!kept.reaping) {
        kept.reaping = true;
        reaper_.Arm();  // made now: its destructor, at this thread's exit, frees what is kept
      }
      kept.head = new (p) Free{kept.head};
      ++kept.count;
      return;
    }
#endif
    ::operator delete (p, std::align_val_t{Align});
  }

 private:
  struct Free {
    Free* next;
  };
  static_assert(Size >= sizeof(Free) && Align >= alignof(Free));
  // Constant-initialized and trivially destructible, so that reading it is one thread-local
  // look-up (no guard of a first use) and it stays valid to the thread's very end.
  struct Kept {
    Free* head = nullptr;
    size_t count = 0;
    bool reaping = false;  // reaper_ made in this thread
    bool gone = false;     // reaper_ destroyed: blocks freed later go straight back
  };
  struct Reaper {
    void Arm() {}
    ~Reaper() {
      Kept& kept = kept_;
      kept.gone = true;
      given_back_.fetch_add(kept.count, std::memory_order_relaxed);
      while (kept.head != nullptr) {
        Free* next = kept.head->next;
        ::operator delete (kept.head, std::align_val_t{Align});
        kept.head = next;
      }
      kept.count = 0;
    }
  };
  static thread_local constinit inline Kept kept_{};
  static thread_local inline Reaper reaper_;
  static inline std::atomic<size_t> given_back_{0};
};

// A standard allocator over BlockPool for std::allocate_shared: single objects come from the
// pool, arrays from operator new.
template <typename T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() = default;
  template <typename U>
  PoolAllocator(const PoolAllocator<U>&) {}  // NOLINT: rebinding, as allocators do

  T* allocate(size_t n) {
    if (n == 1) return static_cast<T*>(BlockPool<sizeof(T), alignof(T)>::Allocate());
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{alignof(T)}));
  }
  void deallocate(T* p, size_t n) {
    if (n == 1) return BlockPool<sizeof(T), alignof(T)>::Deallocate(p);
    ::operator delete (p, std::align_val_t{alignof(T)});
  }
  template <typename U>
  bool operator==(const PoolAllocator<U>&) const {
    return true;
  }
};

}  // namespace lazycl::base
