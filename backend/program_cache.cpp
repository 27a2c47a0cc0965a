#include "backend/program_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "backend/cl_error.h"
#include "backend/disk_cache_trim.h"
#include "backend/file_slot_lock.h"
#include "base/check.h"
#include "base/fault.h"
#include "base/metrics_registry.h"
#include "base/string_view.h"

#ifndef LAZYCL_VERSION_STRING
#error "CMake defines LAZYCL_VERSION_STRING; it is part of the disk-cache key"
#endif

namespace lazycl::backend {
namespace {

// Disk-cache entry: a Header, then the key text, then the device binary. The whole key is stored
// so that a hash collision reads as a mismatch and never loads the wrong program.
constexpr char kMagic[8] = {'L', 'Z', 'C', 'L', 'P', 'R', 'G', '\0'};
constexpr uint32_t kFormatVersion = 1;
// An alias entry: the key of one program, the payload the hash of the bundle that holds it.
constexpr char kAliasMagic[8] = {'L', 'Z', 'C', 'L', 'A', 'L', 'S', '\0'};

struct Header {
  char magic[8];
  uint32_t format_version;
  uint32_t reserved;
  uint64_t key_bytes;
  uint64_t payload_bytes;
  uint64_t payload_checksum;
};

// absl::Hash is salted per process, so the disk cache needs its own stable hash. FNV-1a is
// enough: file names only need to spread, and the stored key settles equality.
uint64_t Fnv1a(std::string_view data, uint64_t basis) {
  uint64_t h = basis;
  for (unsigned char c : data) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string StableHashHex(std::string_view data) {
  return absl::StrFormat("%016x%016x", Fnv1a(data, 0xcbf29ce484222325ULL),
                         Fnv1a(data, 0x84222325cbf29ce4ULL));
}

// A device binary is a few MiB at most; anything larger in the cache is not ours.
constexpr int64_t kMaxEntryBytes = int64_t{256} << 20;

enum class EntryRead { kMissing, kRead, kUnusable };

// Reads a disk-cache entry into `data`. Only a regular file of at most kMaxEntryBytes is read:
// a symlink is never followed (it could point at /dev/zero or out of the cache), and a
// directory, FIFO or device is never opened for reading (a FIFO would block forever). Anything
// else is kUnusable with the reason in `why`.
EntryRead ReadEntry(const std::string& path, std::string* data, std::string* why) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return EntryRead::kMissing;
    *why = errno == ELOOP ? "a symbolic link" : absl::StrCat("cannot open: ", strerror(errno));
    return EntryRead::kUnusable;
  }
  struct stat st;
  EntryRead result = EntryRead::kRead;
  if (fstat(fd, &st) != 0) {
    *why = absl::StrCat("cannot stat: ", strerror(errno));
    result = EntryRead::kUnusable;
  } else if (!S_ISREG(st.st_mode)) {
    *why = "not a regular file";
    result = EntryRead::kUnusable;
  } else if (st.st_size > kMaxEntryBytes) {
    *why = absl::StrCat("larger than ", kMaxEntryBytes, " bytes");
    result = EntryRead::kUnusable;
  } else {
    data->resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (done < data->size()) {
      const ssize_t n = read(fd, data->data() + done, data->size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    data->resize(done);  // a shorter read fails the length check like a truncated file
  }
  close(fd);
  return result;
}

enum class LoadMark { kMarked, kUnmarked, kDeadLoader };

// Marks `path` as being loaded by this process (`<path>.loading` holding our pid), so that a
// process that dies inside the driver while loading a binary does not make every later process
// load the same binary and die the same way: the next one finds the marker of a dead process and
// rebuilds instead. A marker of a live process (a concurrent load) is left alone; a cache
// directory where no marker can be written loads unmarked.
LoadMark MarkLoading(const std::string& marker) {
  const int fd = open(marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd >= 0) {
    const std::string pid = absl::StrCat(getpid());
    const bool written = write(fd, pid.data(), pid.size()) == static_cast<ssize_t>(pid.size());
    close(fd);
    return written ? LoadMark::kMarked : LoadMark::kUnmarked;
  }
  if (errno != EEXIST) return LoadMark::kUnmarked;
  std::string text;
  std::string why;
  int pid = 0;
  if (ReadEntry(marker, &text, &why) == EntryRead::kRead && text.size() < 32 &&
      absl::SimpleAtoi(text, &pid) && pid > 0 && (kill(pid, 0) == 0 || errno == EPERM)) {
    return LoadMark::kUnmarked;
  }
  return LoadMark::kDeadLoader;
}

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

int64_t NanosSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                              start)
      .count();
}

std::string NumberedSource(std::string_view source) {
  std::string out;
  int line = 1;
  for (absl::string_view text : absl::StrSplit(base::Sv(source), '\n')) {
    absl::StrAppendFormat(&out, "%4d | %s\n", line++, text);
  }
  return out;
}

}  // namespace

ProgramCache::ProgramCache(cl::Context context, cl::Device device, ProgramCacheIdentity identity,
                           std::string cache_dir, int debug, ProgramCacheLimits limits)
    : context_(std::move(context)),
      device_(std::move(device)),
      identity_(std::move(identity)),
      cache_dir_(std::move(cache_dir)),
      debug_(debug),
      limits_(limits) {}

size_t ProgramCache::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return programs_.size();
}

void ProgramCache::EvictLocked() {
  while (static_cast<int64_t>(programs_.size()) > limits_.programs) {
    auto oldest = programs_.begin();
    for (auto it = programs_.begin(); it != programs_.end(); ++it) {
      if (it->second->last_use < oldest->second->last_use) oldest = it;
    }
    for (const std::string& member : oldest->second->members) members_.erase(member);
    programs_.erase(oldest);
    base::metrics::Add("ProgramCacheEvictions", 1);
  }
}

std::string ProgramCache::KeyText(std::string_view source, std::string_view options) const {
  return absl::StrCat(
      "lazycl ", LAZYCL_VERSION_STRING, "\nplatform: ", identity_.platform_name,
      "\ndevice: ", identity_.device_name, "\ndriver: ", identity_.driver_version,
      "\nbinary: ", identity_.binary == CachedBinary::kCompiledObject ? "object" : "executable",
      "\ndevice options: ", identity_.device_options, "\noptions: ", base::Sv(options),
      "\nsource:\n", base::Sv(source));
}

std::string ProgramCache::WithDeviceOptions(std::string_view options) const {
  if (identity_.device_options.empty()) return std::string(options);
  if (options.empty()) return identity_.device_options;
  return absl::StrCat(identity_.device_options, " ", base::Sv(options));
}

std::string ProgramCache::MemberKey(std::string_view source, std::string_view options) {
  return absl::StrCat(base::Sv(options), absl::string_view("\0", 1), base::Sv(source));
}

std::string ProgramCache::CachePath(std::string_view source, std::string_view options) const {
  if (cache_dir_.empty()) return "";
  return EntryPath(StableHashHex(KeyText(source, options)));
}

std::string ProgramCache::EntryPath(std::string_view hash) const {
  if (cache_dir_.empty()) return "";
  return absl::StrCat(cache_dir_, "/", base::Sv(hash), ".bin");
}

absl::StatusOr<CachedBinary> CachedBinaryFor(base::KernelCacheBinary setting,
                                             std::string_view platform_name,
                                             std::string_view device_name, bool linker_available) {
  switch (setting) {
    case base::KernelCacheBinary::kExecutable:
      return CachedBinary::kExecutable;
    case base::KernelCacheBinary::kObject:
      if (linker_available) return CachedBinary::kCompiledObject;
      return absl::InvalidArgumentError(absl::StrCat(
          "LAZYCL_KERNEL_CACHE_BINARY=object, but device '", base::Sv(device_name),
          "' has no linker (CL_DEVICE_LINKER_AVAILABLE is false); use auto or executable"));
    case base::KernelCacheBinary::kAuto:
      break;
  }
  return linker_available && platform_name.find("Portable Computing Language") != std::string::npos
             ? CachedBinary::kCompiledObject
             : CachedBinary::kExecutable;
}

absl::StatusOr<ProgramCache::Built> ProgramCache::BuildFromSource(std::string_view source,
                                                                  std::string_view options,
                                                                  const std::string& hash) {
  if (debug_ >= 3) {
    std::fprintf(stderr, "lazycl: building program %s:\n%s\n", hash.c_str(),
                 NumberedSource(source).c_str());
  }
  const auto start = std::chrono::steady_clock::now();
  cl_int err = CL_SUCCESS;
  cl::Program program(context_, std::string(source), /*build=*/false, &err);
  if (err != CL_SUCCESS) return ClStatus(err, "clCreateProgramWithSource");
  // The compiler's warnings are not the user's business (PoCL prints "N warnings generated." on
  // stderr): -w, unless LAZYCL_DEBUG >= 1, which prints the build log, warnings included. A
  // failed build's error carries its log either way. -w is not part of the cache key: it changes
  // no code.
  const std::string own = WithDeviceOptions(options);
  const std::string options_text =
      debug_ >= 1 ? own : absl::StrCat(own, own.empty() ? "" : " ", "-w");
  base::metrics::Add("ProgramBuilds", 1);
  const bool objects = identity_.binary == CachedBinary::kCompiledObject;
  if (objects) {
    cl_device_id device = device_();
    err = clCompileProgram(program(), 1, &device, options_text.c_str(), 0, nullptr, nullptr,
                           nullptr, nullptr);
  } else {
    err = program.build({device_}, options_text.c_str());
  }
  if (err != CL_SUCCESS) {
    base::metrics::RecordTime("CompileTime", NanosSince(start));
    cl_int log_err = CL_SUCCESS;
    std::string log = program.getBuildInfo<CL_PROGRAM_BUILD_LOG>(device_, &log_err);
    return absl::InvalidArgumentError(
        absl::StrCat("OpenCL program ", hash, " failed to build: ", base::Sv(ClErrorName(err)),
                     " (", err, ")\noptions: ", base::Sv(options), "\n--- build log ---\n", log,
                     "\n--- source ---\n", NumberedSource(source)));
  }
  Built built;
  if (objects) {
    absl::StatusOr<cl::Program> linked = Link(program, hash);
    if (!linked.ok()) {
      base::metrics::RecordTime("CompileTime", NanosSince(start));
      return linked.status();
    }
    built.executable = *std::move(linked);
    built.object = program;
  } else {
    built.executable = program;
  }
  base::metrics::RecordTime("CompileTime", NanosSince(start));
  if (debug_ >= 1) {
    std::fprintf(stderr, "lazycl: built program %s in %.1f ms\n", hash.c_str(), MsSince(start));
    cl_int log_err = CL_SUCCESS;
    const std::string log = program.getBuildInfo<CL_PROGRAM_BUILD_LOG>(device_, &log_err);
    if (log_err == CL_SUCCESS && log.find_first_not_of(" \t\r\n") != std::string::npos) {
      std::fprintf(stderr, "lazycl: build log of program %s:\n%s\n", hash.c_str(), log.c_str());
    }
  }
  return built;
}

absl::StatusOr<cl::Program> ProgramCache::Link(const cl::Program& object, const std::string& hash) {
  cl_device_id device = device_();
  cl_program input = object();
  cl_int err = CL_SUCCESS;
  cl_program linked = clLinkProgram(context_(), 1, &device, "", 1, &input, nullptr, nullptr, &err);
  // clLinkProgram may return a program object that holds the log of a failed link.
  cl::Program result;
  if (linked != nullptr) result = cl::Program(linked);
  if (err == CL_SUCCESS) return result;
  std::string log;
  if (linked != nullptr) {
    cl_int log_err = CL_SUCCESS;
    log = result.getBuildInfo<CL_PROGRAM_BUILD_LOG>(device_, &log_err);
  }
  return absl::InvalidArgumentError(absl::StrCat("OpenCL program ", hash,
                                                 " failed to link: ", base::Sv(ClErrorName(err)),
                                                 " (", err, ")\n--- link log ---\n", log));
}

void ProgramCache::Reject(const std::string& path, std::string_view why) {
  // An unusable entry is removed (remove_all: it may be a directory; a symlink is removed, not
  // what it points to) so that the rebuilt program takes its place.
  if (debug_ >= 1) {
    std::fprintf(stderr, "lazycl: discarding disk cache entry %s: %.*s\n", path.c_str(),
                 static_cast<int>(why.size()), why.data());
  }
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

std::optional<ProgramCache::Entry> ProgramCache::ReadCacheEntry(const std::string& path) {
  auto reject = [&](std::string_view why) -> std::optional<Entry> {
    Reject(path, why);
    return std::nullopt;
  };
  std::string data;
  std::string why;
  switch (ReadEntry(path, &data, &why)) {
    case EntryRead::kMissing:
      return std::nullopt;
    case EntryRead::kUnusable:
      return reject(why);
    case EntryRead::kRead:
      break;
  }
  Header header;
  if (data.size() < sizeof(header)) return reject("truncated header");
  std::memcpy(&header, data.data(), sizeof(header));
  Entry entry;
  if (std::memcmp(header.magic, kMagic, sizeof(kMagic)) == 0) {
    entry.alias = false;
  } else if (std::memcmp(header.magic, kAliasMagic, sizeof(kAliasMagic)) == 0) {
    entry.alias = true;
  } else {
    return reject("bad magic");
  }
  if (header.format_version != kFormatVersion) return reject("other format version");
  if (header.key_bytes > data.size() ||
      data.size() != sizeof(header) + header.key_bytes + header.payload_bytes) {
    return reject("wrong length");
  }
  entry.key = data.substr(sizeof(header), header.key_bytes);
  entry.payload = data.substr(sizeof(header) + header.key_bytes);
  if (Fnv1a(entry.payload, 0xcbf29ce484222325ULL) != header.payload_checksum) {
    return reject("checksum mismatch");
  }
  entry.path = path;
  return entry;
}

std::optional<cl::Program> ProgramCache::LoadBinary(const std::string& path, const Entry& entry,
                                                    std::string_view options,
                                                    const std::string& hash) {
  std::error_code ec;
  const std::string marker = path + ".loading";
  const auto start = std::chrono::steady_clock::now();
  const LoadMark mark = MarkLoading(marker);
  if (mark == LoadMark::kDeadLoader) {
    std::filesystem::remove(marker, ec);
    Reject(entry.path, "a process died while loading it");
    return std::nullopt;
  }
  cl::Program::Binaries binaries{
      std::vector<unsigned char>(entry.payload.begin(), entry.payload.end())};
  std::vector<cl_int> binary_status;
  cl_int err = CL_SUCCESS;
  cl::Program loaded(context_, {device_}, binaries, &binary_status, &err);
  if (err == CL_SUCCESS && identity_.binary == CachedBinary::kCompiledObject) {
    absl::StatusOr<cl::Program> linked = Link(loaded, hash);
    if (linked.ok()) {
      loaded = *std::move(linked);
    } else {
      err = CL_LINK_PROGRAM_FAILURE;
    }
  } else if (err == CL_SUCCESS) {
    const std::string options_text = WithDeviceOptions(options);
    err = loaded.build({device_}, options_text.c_str());
  }
  if (mark == LoadMark::kMarked) std::filesystem::remove(marker, ec);
  if (err != CL_SUCCESS) {
    Reject(entry.path, ClErrorName(err));
    return std::nullopt;
  }
  base::metrics::Add("ProgramDiskCacheHits", 1);
  TouchDiskCacheEntry(path);
  base::metrics::RecordTime("CompileTime", NanosSince(start));
  if (debug_ >= 1) {
    std::fprintf(stderr, "lazycl: loaded program %s from disk cache in %.1f ms\n", hash.c_str(),
                 MsSince(start));
  }
  return loaded;
}

ProgramCache::Program* ProgramCache::LoadProgram(const std::string& path, const Entry& entry,
                                                 std::string_view options,
                                                 const std::string& hash) {
  std::optional<cl::Program> loaded = LoadBinary(path, entry, options, hash);
  if (!loaded.has_value()) return nullptr;
  auto program = std::make_unique<Program>();
  program->program = *std::move(loaded);
  program->hash = hash;
  Program* raw = program.get();
  programs_[hash] = std::move(program);
  return raw;
}

bool ProgramCache::LoadMemberLocked(const ProgramSource& member, const std::string& member_key) {
  const std::string path = CachePath(member.source, member.options);
  if (path.empty()) return false;
  std::optional<Entry> entry = ReadCacheEntry(path);
  if (!entry.has_value()) return false;
  const std::string key = KeyText(member.source, member.options);
  if (entry->key != key) {
    Reject(entry->path, "key mismatch");
    return false;
  }
  if (!entry->alias) {
    const std::string hash = StableHashHex(key);
    Program* program = programs_.contains(hash) ? programs_[hash].get()
                                                : LoadProgram(path, *entry, member.options, hash);
    if (program == nullptr) return false;
    AddMemberLocked(member_key, program, "");
    return true;
  }
  // An alias: the member lives in the bundle program named by the payload.
  const std::string& hash = entry->payload;
  if (hash.size() != 32 || hash.find_first_not_of("0123456789abcdef") != std::string::npos) {
    Reject(entry->path, "malformed alias");
    return false;
  }
  const std::string suffix = MemberSuffix(member_key);
  if (auto it = programs_.find(hash); it != programs_.end()) {
    AddMemberLocked(member_key, it->second.get(), suffix);
    TouchDiskCacheEntry(path);
    return true;
  }
  const std::string bundle_path = EntryPath(hash);
  std::optional<Entry> bundle = ReadCacheEntry(bundle_path);
  if (!bundle.has_value()) return false;  // deleted (trimmed): the member is rebuilt
  // The bundle is ours (same identity, its name is its key's hash) and holds this member.
  const std::string shared = SharedOptions(member.options);
  if (bundle->alias || StableHashHex(bundle->key) != hash ||
      bundle->key.rfind(KeyText("", shared), 0) != 0 ||
      bundle->key.find(BundleChunk(member, suffix)) == std::string::npos) {
    Reject(bundle->path, "not the bundle its alias names");
    return false;
  }
  Program* program = LoadProgram(bundle_path, *bundle, shared, hash);
  if (program == nullptr) return false;
  AddMemberLocked(member_key, program, suffix);
  TouchDiskCacheEntry(path);
  return true;
}

void ProgramCache::AddMemberLocked(const std::string& member_key, Program* program,
                                   std::string suffix) {
  program->members.push_back(member_key);
  program->last_use = ++use_clock_;
  members_[member_key] = Member{program, std::move(suffix)};
}

std::string ProgramCache::MemberSuffix(const std::string& member_key) {
  return absl::StrCat("_b", StableHashHex(member_key).substr(0, 12));
}

bool ProgramCache::WriteEntry(const std::string& path, const char (&magic)[8], std::string_view key,
                              std::string_view payload) {
  std::error_code ec;
  std::filesystem::create_directories(cache_dir_, ec);
  if (ec) return false;

  Header header;
  std::memcpy(header.magic, magic, sizeof(header.magic));
  header.format_version = kFormatVersion;
  header.reserved = 0;
  header.key_bytes = key.size();
  header.payload_bytes = payload.size();
  header.payload_checksum = Fnv1a(payload, 0xcbf29ce484222325ULL);

  // Written to a private temporary in the same directory and renamed into place, so a reader
  // (another process) sees either no entry or a whole one.
  static std::atomic<int> sequence{0};
  const std::string temp = absl::StrCat(path, ".tmp.", getpid(), ".", sequence++);
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(&header), sizeof(header));
    out.write(key.data(), static_cast<std::streamsize>(key.size()));
    out.write(payload.data(), static_cast<std::streamsize>(payload.size()));
    out.close();
    if (!out) {
      std::filesystem::remove(temp, ec);
      return false;
    }
  }
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    std::filesystem::remove(temp, ec);
    return false;
  }
  return true;
}

bool ProgramCache::SaveToDisk(const std::string& path, const std::string& key,
                              const cl::Program& program) {
  // The disk cache is an optimisation: any failure here means "not cached", never an error.
  cl_int err = CL_SUCCESS;
  cl::Program::Binaries binaries = program.getInfo<CL_PROGRAM_BINARIES>(&err);
  if (err != CL_SUCCESS || binaries.size() != 1 || binaries[0].empty()) return false;
  std::string_view payload(reinterpret_cast<const char*>(binaries[0].data()), binaries[0].size());
  return WriteEntry(path, kMagic, key, payload);
}

void ProgramCache::TrimDisk() {
  if (const int deleted = TrimDiskCache(cache_dir_, limits_.disk_bytes); deleted > 0) {
    base::metrics::Add("ProgramDiskCacheEvictions", deleted);
  }
}

absl::StatusOr<cl::Program> ProgramCache::BuildOrLoadUnlocked(
    std::string_view source, std::string_view options, const std::string& key,
    const std::string& hash, std::span<const ProgramSource> group) {
  const std::string path = EntryPath(hash);  // hash is that of key, KeyText(source, options)
  FileSlotLock build_lock;
  if (!path.empty()) {
    // Other processes sharing the cache build the same program only one at a time: the slot is
    // the hash's first three hex digits, so unrelated builds rarely wait for each other.
    std::error_code ec;
    std::filesystem::create_directories(cache_dir_, ec);
    uint64_t slot = 0;
    std::from_chars(hash.data(), hash.data() + std::min<size_t>(hash.size(), 3), slot, 16);
    build_lock = FileSlotLock::Acquire(absl::StrCat(cache_dir_, "/build.lock"), slot);
    // A process that held the slot before us may have built this very program: load it.
    if (std::optional<Entry> entry = ReadCacheEntry(path);
        entry.has_value() && !entry->alias && entry->key == key) {
      if (std::optional<cl::Program> loaded = LoadBinary(path, *entry, options, hash)) {
        return *std::move(loaded);
      }
    }
  }
  absl::StatusOr<Built> built = BuildFromSource(source, options, hash);
  if (!built.ok()) return built.status();
  if (!path.empty()) {
    const bool saved = SaveToDisk(
        path, key,
        identity_.binary == CachedBinary::kCompiledObject ? built->object : built->executable);
    // Each member's own entry names the bundle, so a later process finds it from any member.
    for (size_t i = 0; saved && group.size() > 1 && i < group.size(); ++i) {
      WriteEntry(CachePath(group[i].source, group[i].options), kAliasMagic,
                 KeyText(group[i].source, group[i].options), hash);
    }
    if (saved) TrimDisk();
  }
  return built->executable;
}

absl::Status ProgramCache::BuildLocked(std::unique_lock<std::mutex>& lock,
                                       std::span<const ProgramSource> group,
                                       std::span<const std::string> member_keys) {
  const bool bundle = group.size() > 1;
  std::string source;
  std::string options;
  std::vector<std::string> suffixes;
  if (bundle) {
    options = SharedOptions(group[0].options);
    for (size_t i = 0; i < group.size(); ++i) {
      suffixes.push_back(MemberSuffix(member_keys[i]));
      source += BundleChunk(group[i], suffixes.back());
    }
  } else {
    source = std::string(group[0].source);
    options = std::string(group[0].options);
    suffixes.emplace_back();
  }
  const std::string key = KeyText(source, options);
  const std::string hash = StableHashHex(key);
  // Another thread building the same program: wait for it rather than build it twice.
  built_cv_.wait(lock, [&] { return !building_.contains(hash); });
  Program* program = nullptr;
  if (auto it = programs_.find(hash); it != programs_.end()) {
    program = it->second.get();  // the same bundle, built before
  } else {
    // Built and saved without the lock: a build takes from 75 ms to seconds, and other threads
    // meanwhile create kernels of programs already built (the generic tier runs on them while
    // the fused program builds in the background; runtime/tiering.h).
    building_.insert(hash);
    lock.unlock();
    absl::StatusOr<cl::Program> executable = BuildOrLoadUnlocked(source, options, key, hash, group);
    lock.lock();
    building_.erase(hash);
    built_cv_.notify_all();
    if (!executable.ok()) return executable.status();
    auto entry = std::make_unique<Program>();
    entry->program = *std::move(executable);
    entry->hash = hash;
    program = entry.get();
    programs_[hash] = std::move(entry);
  }
  for (size_t i = 0; i < group.size(); ++i) AddMemberLocked(member_keys[i], program, suffixes[i]);
  return absl::OkStatus();
}

absl::Status ProgramCache::EnsureLocked(std::unique_lock<std::mutex>& lock,
                                        std::span<const ProgramSource> sources) {
  std::vector<ProgramSource> missing;
  std::vector<std::string> missing_keys;
  for (const ProgramSource& s : sources) {
    std::string key = MemberKey(s.source, s.options);
    if (members_.contains(key) ||
        std::find(missing_keys.begin(), missing_keys.end(), key) != missing_keys.end()) {
      continue;
    }
    missing.push_back(s);
    missing_keys.push_back(std::move(key));
  }
  if (missing.empty()) return absl::OkStatus();
  if (base::fault::ShouldFail(base::fault::Site::kBuild)) {
    return ClStatus(CL_BUILD_PROGRAM_FAILURE, "clBuildProgram (injected fault)");
  }
  // What the disk cache holds is loaded; the rest is built, one program per set of options.
  std::vector<std::pair<std::string, std::vector<size_t>>> groups;  // shared options, members
  for (size_t i = 0; i < missing.size(); ++i) {
    if (LoadMemberLocked(missing[i], missing_keys[i])) continue;
    const std::string shared = SharedOptions(missing[i].options);
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == shared; });
    if (it == groups.end()) it = groups.insert(groups.end(), {shared, {}});
    it->second.push_back(i);
  }
  for (const auto& [shared, members] : groups) {
    std::vector<ProgramSource> group;
    std::vector<std::string> keys;
    for (size_t i : members) {
      group.push_back(missing[i]);
      keys.push_back(missing_keys[i]);
    }
    if (absl::Status s = BuildLocked(lock, group, keys); !s.ok()) return s;
  }
  EvictLocked();
  return absl::OkStatus();
}

absl::Status ProgramCache::Prepare(std::span<const ProgramSource> sources) {
  std::unique_lock<std::mutex> lock(mu_);
  return EnsureLocked(lock, sources);
}

bool ProgramCache::Cached(std::span<const ProgramSource> sources) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const ProgramSource& s : sources) {
    if (members_.contains(MemberKey(s.source, s.options))) continue;
    const std::string path = CachePath(s.source, s.options);
    std::error_code error;
    if (path.empty() || !std::filesystem::exists(path, error)) return false;
  }
  return true;
}

bool ProgramCache::Warm(std::span<const ProgramSource> sources) {
  if (!Cached(sources)) return false;
  for (const ProgramSource& s : sources) {
    std::error_code error;
    if (!std::filesystem::exists(CachePath(s.source, s.options) + ".warm", error)) return false;
  }
  return true;
}

void ProgramCache::MarkWarm(std::span<const ProgramSource> sources) {
  if (cache_dir_.empty()) return;
  for (const ProgramSource& s : sources) {
    // The marker's content does not matter; an empty file renamed into place is whole.
    const std::string path = CachePath(s.source, s.options) + ".warm";
    WriteEntry(path, kMagic, KeyText(s.source, s.options), "warm");
  }
}

absl::StatusOr<KernelRef> ProgramCache::GetKernel(std::string_view source, std::string_view options,
                                                  std::string_view name) {
  // One build at a time per device: a second thread asking for the same program waits for the
  // first one's build rather than building it again.
  std::unique_lock<std::mutex> lock(mu_);
  const std::string member_key = MemberKey(source, options);
  auto it = members_.find(member_key);
  if (it == members_.end()) {
    const ProgramSource one{source, options};
    if (absl::Status s = EnsureLocked(lock, {&one, 1}); !s.ok()) return s;
    it = members_.find(member_key);
    LAZYCL_CHECK(it != members_.end(), "a program was built but not registered");
  }
  Program& program = *it->second.program;
  program.last_use = ++use_clock_;
  const std::string entry = absl::StrCat(base::Sv(name), it->second.suffix);
  auto kernel_it = program.kernels.find(entry);
  if (kernel_it != program.kernels.end()) return kernel_it->second;
  cl_int err = CL_SUCCESS;
  cl::Kernel kernel(program.program, entry.c_str(), &err);
  if (err == CL_INVALID_KERNEL_NAME) {
    cl_int names_err = CL_SUCCESS;
    std::string names = program.program.getInfo<CL_PROGRAM_KERNEL_NAMES>(&names_err);
    return absl::NotFoundError(absl::StrCat("no kernel named '", base::Sv(name),
                                            "' in OpenCL program ", program.hash,
                                            "; it defines: ", names));
  }
  if (err != CL_SUCCESS)
    return ClStatus(err, absl::StrCat("clCreateKernel('", base::Sv(name), "')"));
  KernelRef result = std::make_shared<const Kernel>(std::move(kernel), std::string(name));
  program.kernels.emplace(entry, result);
  return result;
}

}  // namespace lazycl::backend
