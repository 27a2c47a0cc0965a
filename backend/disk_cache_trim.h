#pragma once

#include <cstdint>
#include <string>

// The disk cache's bound (LAZYCL_KERNEL_CACHE_MAX_BYTES; internal to backend/).
namespace lazycl::backend {

// When the cache entries (`*.bin` regular files) in `dir` hold more than `max_bytes`, deletes the
// ones used longest ago (by modification time: a load touches its entry) until they hold at most
// 90% of it, so that the next few saves do not each trim again. Also deletes temporaries
// (`*.tmp.*`) older than an hour, which a process killed while saving leaves. Never fails: an
// entry another process deletes or replaces meanwhile is skipped, and a reader of a deleted entry
// rebuilds its program (ProgramCache::LoadFromDisk treats a missing entry as a miss). Returns
// the number of entries deleted.
int TrimDiskCache(const std::string& dir, int64_t max_bytes);

// Marks the entry at `path` used now (its modification time), so trimming keeps it longest.
void TouchDiskCacheEntry(const std::string& path);

}  // namespace lazycl::backend
