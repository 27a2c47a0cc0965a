#include "backend/disk_cache_trim.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <system_error>
#include <vector>

namespace lazycl::backend {
namespace fs = std::filesystem;

int TrimDiskCache(const std::string& dir, int64_t max_bytes) {
  struct Entry {
    fs::path path;
    fs::file_time_type used;
    int64_t bytes;
  };
  std::vector<Entry> entries;
  int64_t total = 0;
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code entry_ec;
    if (!it->is_regular_file(entry_ec) || entry_ec) continue;
    const fs::path& path = it->path();
    const std::string name = path.filename().string();
    const fs::file_time_type used = it->last_write_time(entry_ec);
    if (entry_ec) continue;
    if (name.find(".tmp.") != std::string::npos) {
      if (now - used > std::chrono::hours(1)) fs::remove(path, entry_ec);
      continue;
    }
    if (path.extension() != ".bin") continue;
    const int64_t bytes = static_cast<int64_t>(it->file_size(entry_ec));
    if (entry_ec) continue;
    entries.push_back({path, used, bytes});
    total += bytes;
  }
  if (total <= max_bytes) return 0;
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.used < b.used; });
  const int64_t target = max_bytes / 10 * 9;
  int deleted = 0;
  for (const Entry& e : entries) {
    if (total <= target) break;
    std::error_code remove_ec;
    if (fs::remove(e.path, remove_ec)) ++deleted;
    total -= e.bytes;  // gone either way: deleted now, or by another process
  }
  return deleted;
}

void TouchDiskCacheEntry(const std::string& path) {
  std::error_code ec;
  fs::last_write_time(path, fs::file_time_type::clock::now(), ec);
}

}  // namespace lazycl::backend
