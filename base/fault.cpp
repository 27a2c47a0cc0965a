#include "base/fault.h"

#include <array>
#include <atomic>

namespace lazycl::base::fault {
namespace {

struct SiteState {
  std::atomic<int64_t> count{0};
  std::atomic<int64_t> fail_at{0};  // 0: disarmed
  std::atomic<bool> sticky{false};  // FailFrom: every call from fail_at on fails
};

std::array<SiteState, kSites>& States() {
  static std::array<SiteState, kSites> states;
  return states;
}

SiteState& At(Site site) { return States()[static_cast<size_t>(site)]; }

}  // namespace

const char* SiteName(Site site) {
  switch (site) {
    case Site::kAlloc:
      return "alloc";
    case Site::kBuild:
      return "build";
    case Site::kLaunch:
      return "launch";
    case Site::kTransfer:
      return "transfer";
  }
  return "?";
}

void FailNth(Site site, int64_t nth) {
  SiteState& s = At(site);
  s.fail_at.store(0);
  s.count.store(0);
  s.sticky.store(false);
  s.fail_at.store(nth);
}

void FailFrom(Site site, int64_t nth) {
  FailNth(site, 0);
  At(site).sticky.store(true);
  At(site).fail_at.store(nth);
}

int64_t Count(Site site) { return At(site).count.load(); }

void Reset() {
  for (SiteState& s : States()) {
    s.fail_at.store(0);
    s.count.store(0);
    s.sticky.store(false);
  }
}

bool ShouldFail(Site site) {
  SiteState& s = At(site);
  const int64_t n = s.count.fetch_add(1, std::memory_order_relaxed) + 1;
  int64_t armed = s.fail_at.load(std::memory_order_relaxed);
  if (armed != 0 && s.sticky.load(std::memory_order_relaxed)) return n >= armed;
  return armed != 0 && n == armed && s.fail_at.compare_exchange_strong(armed, 0);
}

}  // namespace lazycl::base::fault
