// base::BlockPool and base::PoolAllocator (base/pool_allocator.h): a thread reuses the blocks it
// freed, up to the pool's bound, whichever thread took them first; objects made by
// std::allocate_shared through it live and die as with make_shared. Under AddressSanitizer the
// pool hands every block back to operator delete, so reuse is not expected there.
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "base/pool_allocator.h"
#include "gtest/gtest.h"

namespace lazycl {
namespace {

// A size no other object of the library has, so that this test owns the pool's lists.
struct alignas(8) Thing {
  char bytes[1096];
};
using Pool = base::BlockPool<sizeof(Thing), alignof(Thing)>;

#ifdef __SANITIZE_ADDRESS__
constexpr bool kPooled = false;
#else
constexpr bool kPooled = true;
#endif

TEST(PoolAllocator, AThreadReusesTheBlocksItFreed) {
  if (!kPooled) GTEST_SKIP() << "AddressSanitizer: blocks go back to operator delete";
  ASSERT_EQ(Pool::KeptHere(), 0u);
  std::vector<void*> blocks;
  for (int i = 0; i < 10; ++i) blocks.push_back(Pool::Allocate());
  const std::set<void*> freed(blocks.begin(), blocks.end());
  for (void* b : blocks) Pool::Deallocate(b);
  EXPECT_EQ(Pool::KeptHere(), 10u);
  for (int i = 0; i < 10; ++i) {
    void* b = Pool::Allocate();
    EXPECT_TRUE(freed.count(b)) << "block " << i << " was not one of those freed";
    blocks[static_cast<size_t>(i)] = b;
  }
  EXPECT_EQ(Pool::KeptHere(), 0u);
  for (void* b : blocks) Pool::Deallocate(b);
}

TEST(PoolAllocator, KeepsAtMostItsBound) {
  if (!kPooled) GTEST_SKIP() << "AddressSanitizer: blocks go back to operator delete";
  const size_t n = Pool::kMaxKept + 50;
  std::vector<void*> blocks;
  for (size_t i = 0; i < n; ++i) blocks.push_back(Pool::Allocate());
  for (void* b : blocks) Pool::Deallocate(b);  // the last 50 go back to operator delete
  EXPECT_EQ(Pool::KeptHere(), Pool::kMaxKept);
  std::vector<void*> again;
  for (size_t i = 0; i < n; ++i) again.push_back(Pool::Allocate());
  EXPECT_EQ(Pool::KeptHere(), 0u);
  for (void* b : again) Pool::Deallocate(b);
}

TEST(PoolAllocator, ABlockFreedOnAnotherThreadServesThatThread) {
  if (!kPooled) GTEST_SKIP() << "AddressSanitizer: blocks go back to operator delete";
  const size_t kept_here = Pool::KeptHere();
  void* taken_here = Pool::Allocate();
  void* taken_there = nullptr;
  size_t kept_there = 0;
  std::thread([&] {
    Pool::Deallocate(taken_here);
    kept_there = Pool::KeptHere();
    taken_there = Pool::Allocate();
    Pool::Deallocate(taken_there);
  }).join();  // the thread's exit gives its kept blocks back to operator delete
  EXPECT_EQ(kept_there, 1u);
  EXPECT_EQ(taken_there, taken_here);
  EXPECT_EQ(Pool::KeptHere(), kept_here == 0 ? 0u : kept_here - 1);
}

TEST(PoolAllocator, AThreadGivesItsKeptBlocksBackAsItEnds) {
  if (!kPooled) GTEST_SKIP() << "AddressSanitizer: blocks go back to operator delete";
  const size_t before = Pool::GivenBackAtExit();
  size_t kept_there = 0;
  std::thread([&] {
    std::vector<void*> blocks;
    for (int i = 0; i < 5; ++i) blocks.push_back(Pool::Allocate());
    for (void* b : blocks) Pool::Deallocate(b);
    kept_there = Pool::KeptHere();
  }).join();
  EXPECT_EQ(kept_there, 5u);
  EXPECT_EQ(Pool::GivenBackAtExit(), before + 5);
}

TEST(PoolAllocator, SharedObjectsLiveAndDieAsWithMakeShared) {
  struct Counted {
    explicit Counted(int* alive) : alive(alive) { ++*alive; }
    ~Counted() { --*alive; }
    int* alive;
    int payload[40] = {};
  };
  int alive = 0;
  {
    std::vector<std::shared_ptr<const Counted>> all;
    for (int i = 0; i < 3000; ++i) {
      all.push_back(std::allocate_shared<const Counted>(base::PoolAllocator<Counted>(), &alive));
    }
    EXPECT_EQ(alive, 3000);
    all.resize(1000);
    EXPECT_EQ(alive, 1000);
    std::shared_ptr<const Counted> copy = all[0];
    all.clear();
    EXPECT_EQ(alive, 1);
    for (int i = 0; i < 3000; ++i) {
      all.push_back(std::allocate_shared<const Counted>(base::PoolAllocator<Counted>(), &alive));
    }
    EXPECT_EQ(alive, 3001);
  }
  EXPECT_EQ(alive, 0);
}

}  // namespace
}  // namespace lazycl
