#include "backend/event_wait.h"

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <thread>

#include "backend/cpu_pause.h"

namespace lazycl::backend {
namespace {

// The flags that event callbacks raise for waiting threads. A slot's word holds a generation
// (bits 2 and up), "taken" (bit 1) and "ended" (bit 0). A waiter takes a free slot and gives
// its callback a token (slot index and generation); the callback raises "ended" only while the
// slot is still taken under that generation. So a callback that comes after its waiter has gone
// (a driver may run it after clWaitForEvents has returned), or never (PoCL 3.1 calls no
// CL_COMPLETE callback for a command that failed), touches nothing that anyone still reads,
// and nothing is allocated that could be lost. Static storage: a callback that runs as the
// process exits finds it there.
constexpr int kSlots = 64;
constexpr uint64_t kTaken = 2, kEnded = 1;
constexpr uint64_t kGenerationMask = (uint64_t{1} << 56) - 1;  // fits the token beside the index
std::array<std::atomic<uint64_t>, kSlots> end_flags{};

struct Slot {
  int index;
  uint64_t generation;
  void* token() const {
    return reinterpret_cast<void*>(static_cast<uintptr_t>((generation << 8) | index));
  }
};

std::optional<Slot> TakeSlot() {
  for (int i = 0; i < kSlots; ++i) {
    uint64_t word = end_flags[i].load(std::memory_order_relaxed);
    if (word & kTaken) continue;
    const uint64_t generation = ((word >> 2) + 1) & kGenerationMask;
    if (end_flags[i].compare_exchange_strong(word, (generation << 2) | kTaken,
                                             std::memory_order_acq_rel)) {
      return Slot{i, generation};
    }
  }
  return std::nullopt;  // every slot is in use: the caller polls instead
}

void GiveBack(const Slot& slot) {
  end_flags[slot.index].store(slot.generation << 2, std::memory_order_release);
}

bool Ended(const Slot& slot) {
  return end_flags[slot.index].load(std::memory_order_acquire) & kEnded;
}

void CL_CALLBACK RaiseEnded(cl_event, cl_int, void* token) {
  const auto bits = reinterpret_cast<uintptr_t>(token);
  std::atomic<uint64_t>& flag = end_flags[bits & 0xff];
  const uint64_t taken = ((static_cast<uint64_t>(bits) >> 8) << 2) | kTaken;
  uint64_t expected = taken;  // taken under this generation, not yet ended
  flag.compare_exchange_strong(expected, taken | kEnded, std::memory_order_acq_rel);
}

// Whether polling can stop: the event's command has ended, well or badly, or its status cannot
// be read (clWaitForEvents then says what is wrong).
bool StatusSaysStop(cl_event event) {
  cl_int status = CL_QUEUED;
  return clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status,
                        nullptr) != CL_SUCCESS ||
         status <= CL_COMPLETE;
}

}  // namespace

cl_int WaitForEvent(cl_event event, int64_t spin_ns) {
  if (spin_ns <= 0) return clWaitForEvents(1, &event);
  std::optional<Slot> slot = TakeSlot();
  if (slot.has_value() &&
      clSetEventCallback(event, CL_COMPLETE, RaiseEnded, slot->token()) != CL_SUCCESS) {
    GiveBack(*slot);
    slot.reset();
  }
  const auto start = std::chrono::steady_clock::now();
  const auto until = start + std::chrono::nanoseconds(spin_ns);
  // With a callback the host reads its flag, which no driver thread locks, and asks the driver
  // only every ~25 us (a failed command raises no flag in PoCL 3.1). Without one it asks every
  // round; the status is read under a lock the driver's threads take too.
  const auto ask_every =
      slot.has_value() ? std::chrono::microseconds(25) : std::chrono::microseconds(0);
  auto next_ask = start + ask_every;
  while (true) {
    if (slot.has_value() && Ended(*slot)) break;
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_ask) {
      if (StatusSaysStop(event)) break;
      next_ask = now + ask_every;
    }
    if (now >= until) break;
    for (int i = 0; i < 16; ++i) CpuPause();
    // A driver thread woken onto this CPU runs now rather than at the next tick.
    std::this_thread::yield();
  }
  if (slot.has_value()) GiveBack(*slot);
  return clWaitForEvents(1, &event);
}

}  // namespace lazycl::backend
