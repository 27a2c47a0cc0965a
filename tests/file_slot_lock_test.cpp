#include "backend/file_slot_lock.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace lazycl::backend {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

class FileSlotLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/lazycl-file-slot-lock-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/build.lock";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Acquires `slot` on another thread; `acquired` turns true once it holds it, and the thread
  // keeps it until `release` turns true.
  std::thread AcquireOnThread(uint64_t slot, std::atomic<bool>& acquired,
                              std::atomic<bool>& release) {
    return std::thread([this, slot, &acquired, &release] {
      FileSlotLock lock = FileSlotLock::Acquire(path_, slot);
      acquired = lock.held();
      while (!release) std::this_thread::sleep_for(milliseconds(1));
    });
  }

  // Waits up to ten seconds for `flag`.
  static bool WaitFor(const std::atomic<bool>& flag) {
    for (int i = 0; i < 10000 && !flag; ++i) std::this_thread::sleep_for(milliseconds(1));
    return flag;
  }

  std::string dir_;
  std::string path_;
};

TEST_F(FileSlotLockTest, TheSameSlotWaitsForItsHolderAcrossThreads) {
  std::atomic<bool> acquired{false};
  std::atomic<bool> release{true};
  std::thread other;
  {
    FileSlotLock lock = FileSlotLock::Acquire(path_, 7);
    ASSERT_TRUE(lock.held());
    other = AcquireOnThread(7, acquired, release);
    std::this_thread::sleep_for(milliseconds(200));
    EXPECT_FALSE(acquired) << "a second thread took slot 7 while this one held it";
  }  // released here
  EXPECT_TRUE(WaitFor(acquired)) << "slot 7 was not free after its holder released it";
  other.join();
}

TEST_F(FileSlotLockTest, OtherSlotsDoNotWait) {
  FileSlotLock lock = FileSlotLock::Acquire(path_, 7);
  ASSERT_TRUE(lock.held());
  std::atomic<bool> acquired{false};
  std::atomic<bool> release{false};
  std::thread other = AcquireOnThread(8, acquired, release);
  EXPECT_TRUE(WaitFor(acquired)) << "slot 8 waited for the holder of slot 7";
  release = true;
  other.join();
}

TEST_F(FileSlotLockTest, MovedLockStillHoldsAndReleasesOnce) {
  FileSlotLock moved;
  {
    FileSlotLock lock = FileSlotLock::Acquire(path_, 3);
    moved = std::move(lock);
  }
  ASSERT_TRUE(moved.held());
  std::atomic<bool> acquired{false};
  std::atomic<bool> release{true};
  std::thread other = AcquireOnThread(3, acquired, release);
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_FALSE(acquired) << "the moved-from lock's destruction released slot 3";
  moved = FileSlotLock();
  EXPECT_TRUE(WaitFor(acquired));
  other.join();
}

// Another process holds the slot until it is killed: the kernel releases a dead process's lock.
// (A fork is safe here: this binary opens no OpenCL device, so no driver threads exist.)
TEST_F(FileSlotLockTest, AnotherProcessHoldsTheSlotUntilItDies) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    FileSlotLock lock = FileSlotLock::Acquire(path_, 11);
    const char byte = lock.held() ? 'y' : 'n';
    if (write(ready[1], &byte, 1) != 1) _exit(2);
    pause();  // until killed
    _exit(0);
  }
  close(ready[1]);
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  close(ready[0]);
  ASSERT_EQ(byte, 'y');
  std::atomic<bool> acquired{false};
  std::atomic<bool> release{true};
  std::thread other = AcquireOnThread(11, acquired, release);
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_FALSE(acquired) << "slot 11 was taken while another process held it";
  ASSERT_EQ(kill(child, SIGKILL), 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  EXPECT_TRUE(WaitFor(acquired)) << "a killed process's lock was not released";
  other.join();
}

TEST_F(FileSlotLockTest, AFileThatCannotBeCreatedGivesALockThatHoldsNothing) {
  const FileSlotLock lock = FileSlotLock::Acquire(dir_ + "/no/such/dir/build.lock", 1);
  EXPECT_FALSE(lock.held());
  EXPECT_FALSE(fs::exists(dir_ + "/no"));
}

}  // namespace
}  // namespace lazycl::backend
