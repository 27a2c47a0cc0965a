#include "base/settings.h"

#include <cstdlib>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/status.h"
#include "base/string_view.h"

namespace lazycl::base {
namespace {

absl::Status Malformed(std::string_view variable, std::string_view value,
                       std::string_view expected) {
  return absl::InvalidArgumentError(
      absl::StrCat(Sv(variable), "=\"", Sv(value), "\" is malformed: expected ", Sv(expected)));
}

// An unset variable and an empty one both mean "use the default".
std::optional<std::string> Get(const EnvLookup& lookup, std::string_view name) {
  std::optional<std::string> value = lookup(name);
  if (!value.has_value()) return std::nullopt;
  std::string trimmed(absl::StripAsciiWhitespace(*value));
  if (trimmed.empty()) return std::nullopt;
  return trimmed;
}

// Finds `value` (case-insensitively) among `names`; returns its index or -1.
template <size_t N>
int Choose(std::string_view value, const std::string_view (&names)[N]) {
  for (size_t i = 0; i < N; ++i) {
    if (absl::EqualsIgnoreCase(Sv(value), Sv(names[i]))) return static_cast<int>(i);
  }
  return -1;
}

absl::StatusOr<int64_t> ParseBytes(std::string_view variable, std::string_view value) {
  constexpr std::string_view kExpected =
      "a number of bytes, optionally with a suffix K, M, G, KiB, MiB or GiB (e.g. 512MiB)";
  size_t digits = 0;
  while (digits < value.size() && absl::ascii_isdigit(static_cast<unsigned char>(value[digits]))) {
    ++digits;
  }
  uint64_t number = 0;
  if (digits == 0 || !absl::SimpleAtoi(Sv(value.substr(0, digits)), &number)) {
    return Malformed(variable, value, kExpected);
  }
  std::string suffix = absl::AsciiStrToLower(absl::StripAsciiWhitespace(Sv(value.substr(digits))));
  int shift = 0;
  if (suffix.empty() || suffix == "b") {
    shift = 0;
  } else if (suffix == "k" || suffix == "kib" || suffix == "kb") {
    shift = 10;
  } else if (suffix == "m" || suffix == "mib" || suffix == "mb") {
    shift = 20;
  } else if (suffix == "g" || suffix == "gib" || suffix == "gb") {
    shift = 30;
  } else {
    return Malformed(variable, value, kExpected);
  }
  if (number > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) >> shift)) {
    return Malformed(variable, value, "a byte count that fits in 63 bits");
  }
  return static_cast<int64_t>(number << shift);
}

}  // namespace

absl::StatusOr<Settings> ParseSettings(const EnvLookup& lookup) {
  Settings settings;
  if (auto v = Get(lookup, "LAZYCL_PLATFORM")) settings.platform = *v;
  if (auto v = Get(lookup, "LAZYCL_DEVICE")) settings.device = *v;

  if (auto v = Get(lookup, "LAZYCL_DEVICE_TYPE")) {
    static constexpr std::string_view kNames[] = {"gpu", "cpu", "accelerator", "all"};
    static constexpr DeviceTypeFilter kValues[] = {DeviceTypeFilter::kGpu, DeviceTypeFilter::kCpu,
                                                   DeviceTypeFilter::kAccelerator,
                                                   DeviceTypeFilter::kAll};
    int i = Choose(*v, kNames);
    if (i < 0) return Malformed("LAZYCL_DEVICE_TYPE", *v, "one of gpu, cpu, accelerator, all");
    settings.device_type = kValues[i];
  }

  if (auto v = Get(lookup, "LAZYCL_KERNEL_CACHE_DIR")) {
    settings.kernel_cache_dir = absl::EqualsIgnoreCase(*v, "off") ? "" : *v;
  } else if (auto xdg = Get(lookup, "XDG_CACHE_HOME")) {
    settings.kernel_cache_dir = absl::StrCat(*xdg, "/lazycl");
  } else if (auto home = Get(lookup, "HOME")) {
    settings.kernel_cache_dir = absl::StrCat(*home, "/.cache/lazycl");
  }

  if (auto v = Get(lookup, "LAZYCL_KERNEL_CACHE_MAX_BYTES")) {
    absl::StatusOr<int64_t> bytes = ParseBytes("LAZYCL_KERNEL_CACHE_MAX_BYTES", *v);
    if (!bytes.ok()) return bytes.status();
    if (*bytes == 0) {
      return Malformed("LAZYCL_KERNEL_CACHE_MAX_BYTES", *v,
                       "a positive byte count (LAZYCL_KERNEL_CACHE_DIR=off turns the cache off)");
    }
    settings.kernel_cache_max_bytes = *bytes;
  }
  if (auto v = Get(lookup, "LAZYCL_CONSTANT_CACHE_BYTES")) {
    absl::StatusOr<int64_t> bytes = ParseBytes("LAZYCL_CONSTANT_CACHE_BYTES", *v);
    if (!bytes.ok()) return bytes.status();
    settings.constant_cache_bytes = *bytes;
  }
  for (auto [name, field] : {std::pair{"LAZYCL_PROGRAM_CACHE_SIZE", &settings.program_cache_size},
                             std::pair{"LAZYCL_GRAPH_CACHE_SIZE", &settings.graph_cache_size}}) {
    if (auto v = Get(lookup, name)) {
      int64_t n = 0;
      if (!absl::SimpleAtoi(*v, &n) || n < 1) return Malformed(name, *v, "a positive integer");
      *field = n;
    }
  }

  if (auto v = Get(lookup, "LAZYCL_MAX_PENDING_NODES")) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(*v, &n) || n < 16 || n > (int64_t{1} << 20)) {
      return Malformed("LAZYCL_MAX_PENDING_NODES", *v, "an integer from 16 to 1048576");
    }
    settings.max_pending_nodes = n;
  }

  for (auto [name, field] : {std::pair{"LAZYCL_KEEP_AWAKE_US", &settings.keep_awake_us},
                             std::pair{"LAZYCL_HOST_SPIN_US", &settings.host_spin_us}}) {
    if (auto v = Get(lookup, name)) {
      int64_t us = 0;
      if (!absl::SimpleAtoi(*v, &us) || us < 0 || us > 1000000) {
        return Malformed(name, *v, "an integer from 0 to 1000000 (microseconds)");
      }
      *field = us;
    }
  }

  if (auto v = Get(lookup, "LAZYCL_PIN_THREADS")) {
    if (*v != "0" && *v != "1") return Malformed("LAZYCL_PIN_THREADS", *v, "0 or 1");
    settings.pin_threads = *v == "1";
  }
  if (auto v = Get(lookup, "LAZYCL_BATCH_WORKERS")) {
    if (*v != "0" && *v != "1") return Malformed("LAZYCL_BATCH_WORKERS", *v, "0 or 1");
    settings.batch_workers = *v == "1";
  }

  if (auto v = Get(lookup, "LAZYCL_DEBUG")) {
    int level = 0;
    if (!absl::SimpleAtoi(*v, &level) || level < 0 || level > 3) {
      return Malformed("LAZYCL_DEBUG", *v, "an integer from 0 to 3");
    }
    settings.debug = level;
  }

  if (auto v = Get(lookup, "LAZYCL_PROFILE")) {
    if (*v != "0" && *v != "1") return Malformed("LAZYCL_PROFILE", *v, "0 or 1");
    settings.profile = *v == "1";
  }

  if (auto v = Get(lookup, "LAZYCL_DUMP_DIR")) settings.dump_dir = *v;

  if (auto v = Get(lookup, "LAZYCL_TRANSFER_GUARD")) {
    static constexpr std::string_view kNames[] = {"allow", "log", "disallow"};
    static constexpr TransferGuard kValues[] = {TransferGuard::kAllow, TransferGuard::kLog,
                                                TransferGuard::kDisallow};
    int i = Choose(*v, kNames);
    if (i < 0) return Malformed("LAZYCL_TRANSFER_GUARD", *v, "one of allow, log, disallow");
    settings.transfer_guard = kValues[i];
  }

  if (auto v = Get(lookup, "LAZYCL_DEVICE_MEMORY_LIMIT")) {
    absl::StatusOr<int64_t> bytes = ParseBytes("LAZYCL_DEVICE_MEMORY_LIMIT", *v);
    if (!bytes.ok()) return bytes.status();
    // 0 would read as "no limit" while saying "no memory": neither is what a user means.
    if (*bytes == 0) {
      return Malformed("LAZYCL_DEVICE_MEMORY_LIMIT", *v,
                       "a positive byte count (unset the variable for no limit)");
    }
    settings.device_memory_limit = *bytes;
  }

  if (auto v = Get(lookup, "LAZYCL_DEVICE_POOL_LIMIT")) {
    absl::StatusOr<int64_t> bytes = ParseBytes("LAZYCL_DEVICE_POOL_LIMIT", *v);
    if (!bytes.ok()) return bytes.status();
    settings.device_pool_limit = *bytes;  // 0 is meaningful: pool nothing
  }

  if (auto v = Get(lookup, "LAZYCL_KERNEL_CACHE_BINARY")) {
    static constexpr std::string_view kNames[] = {"auto", "object", "executable"};
    static constexpr KernelCacheBinary kValues[] = {
        KernelCacheBinary::kAuto, KernelCacheBinary::kObject, KernelCacheBinary::kExecutable};
    int i = Choose(*v, kNames);
    if (i < 0)
      return Malformed("LAZYCL_KERNEL_CACHE_BINARY", *v, "one of auto, object, executable");
    settings.kernel_cache_binary = kValues[i];
  }

  if (auto v = Get(lookup, "LAZYCL_CODEGEN")) {
    static constexpr std::string_view kNames[] = {"auto", "cpu", "gpu"};
    static constexpr CodegenStrategy kValues[] = {CodegenStrategy::kAuto, CodegenStrategy::kCpu,
                                                  CodegenStrategy::kGpu};
    int i = Choose(*v, kNames);
    if (i < 0) return Malformed("LAZYCL_CODEGEN", *v, "one of auto, cpu, gpu");
    settings.codegen = kValues[i];
  }

  if (auto v = Get(lookup, "LAZYCL_COMPILE")) {
    static constexpr std::string_view kNames[] = {"tiered", "sync", "generic"};
    static constexpr CompileMode kValues[] = {CompileMode::kTiered, CompileMode::kSync,
                                              CompileMode::kGeneric};
    int i = Choose(*v, kNames);
    if (i < 0) return Malformed("LAZYCL_COMPILE", *v, "one of tiered, sync, generic");
    settings.compile = kValues[i];
  }
  return settings;
}

const absl::StatusOr<Settings>& ProcessSettings() {
  // Read once: later changes to the environment do not move a running process to another device.
  static const absl::StatusOr<Settings>* const settings =
      new absl::StatusOr<Settings>(ParseSettings([](std::string_view name) {
        const char* value = std::getenv(std::string(name).c_str());
        return value == nullptr ? std::nullopt : std::optional<std::string>(value);
      }));
  return *settings;
}

const Settings& CurrentSettings() {
  const absl::StatusOr<Settings>& settings = ProcessSettings();
  if (!settings.ok()) Throw(settings.status());
  return *settings;
}

std::string_view DeviceTypeName(DeviceType type) {
  switch (type) {
    case DeviceType::kGpu:
      return "gpu";
    case DeviceType::kCpu:
      return "cpu";
    case DeviceType::kAccelerator:
      return "accelerator";
    case DeviceType::kOther:
      return "other";
  }
  return "other";
}

}  // namespace lazycl::base
