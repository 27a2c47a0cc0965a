#pragma once

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
    if (!gone_) {
      Kept& kept = kept_;
      if (kept.head != nullptr) {
        Free* block = kept.head;
        kept.head = block->next;
        --kept.count;
        return block;
      }
    }
#endif
    return ::operator new (Size, std::align_val_t{Align});
  }

  // The blocks this thread keeps now (for tests).
  static size_t KeptHere() { return gone_ ? 0 : kept_.count; }

  static void Deallocate(void* p) {
#ifndef __SANITIZE_ADDRESS__
    if (!gone_) {
      Kept& kept = kept_;
      if (kept.count < kMaxKept) {
        kept.head = new (p) Free{kept.head};
        ++kept.count;
        return;
      }
    }
#endif
    ::operator delete (p, std::align_val_t{Align});
  }

 private:
  struct Free {
    Free* next;
  };
  static_assert(Size >= sizeof(Free) && Align >= alignof(Free));
  struct Kept {
    Free* head = nullptr;
    size_t count = 0;
    ~Kept() {
      gone_ = true;  // blocks freed later in this thread's exit go straight back
      while (head != nullptr) {
        Free* next = head->next;
        ::operator delete (head, std::align_val_t{Align});
        head = next;
      }
    }
  };
  static thread_local inline Kept kept_;
  static thread_local inline bool gone_ = false;  // trivially destructible: valid to the end
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
