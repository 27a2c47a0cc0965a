#include "backend/mapping_budget.h"

#include <charconv>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"

namespace lazycl::backend {

bool PoclKeepsEveryKernel(std::string_view platform_name, std::string_view platform_version) {
  if (platform_name.find("Portable Computing Language") == std::string_view::npos) return false;
  const size_t at = platform_version.find("PoCL ");
  if (at == std::string_view::npos) return true;  // a PoCL that does not say: assume the worst
  const std::string_view number = platform_version.substr(at + 5);
  int major = 0;
  const auto [end, err] = std::from_chars(number.data(), number.data() + number.size(), major);
  return err != std::errc() || major < 4;
}

namespace {

int64_t CountProcessMappings() {
  std::ifstream maps("/proc/self/maps", std::ios::binary);
  if (!maps) return -1;
  int64_t lines = 0;
  char buffer[1 << 16];
  while (maps.read(buffer, sizeof buffer) || maps.gcount() > 0) {
    for (std::streamsize i = 0; i < maps.gcount(); ++i) lines += buffer[i] == '\n';
  }
  return lines;
}

int64_t ProcessMappingLimit() {
  std::ifstream file("/proc/sys/vm/max_map_count");
  int64_t limit = -1;
  if (!(file >> limit) || limit <= 0) return -1;
  return limit;
}

}  // namespace

MappingBudget::MappingBudget(std::function<int64_t()> count, int64_t limit)
    : count_(std::move(count)), limit_(limit) {}

MappingBudget& MappingBudget::Process() {
  static MappingBudget* budget = new MappingBudget(CountProcessMappings, ProcessMappingLimit());
  return *budget;
}

absl::Status MappingBudget::BeforeLoad(std::string_view kernel) {
  if (limit_ <= 0) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t near = limit_ - kMargin;
  const bool stale = counted_ == -2 || loads_since_ >= kRecount ||
                     (counted_ >= 0 && counted_ + (loads_since_ + 1) * kPerKernel > near);
  if (stale) {
    counted_ = count_();
    loads_since_ = 0;
  }
  if (counted_ < 0) return absl::OkStatus();  // cannot be read: nothing to go by
  if (counted_ > near) {
    loads_since_ = kRecount;  // read again next time: something may have been unmapped
    return absl::ResourceExhaustedError(absl::StrCat(
        "launch of '", std::string(kernel), "': this process has ", counted_,
        " memory mappings of the system's limit of ", limit_,
        " (vm.max_map_count), and this PoCL (before 4.0) keeps every kernel it loads mapped "
        "until the process ends; loading another could abort the process. Run fewer distinct "
        "kernels per process, raise the limit (sysctl -w vm.max_map_count=262144) or use PoCL "
        "4.0 or later"));
  }
  ++loads_since_;
  return absl::OkStatus();
}

}  // namespace lazycl::backend
