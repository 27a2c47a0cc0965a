#include "backend/program_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "backend/cl_error.h"
#include "backend/disk_cache_trim.h"
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
    programs_.erase(oldest);
    base::metrics::Add("ProgramCacheEvictions", 1);
  }
}

std::string ProgramCache::KeyText(std::string_view source, std::string_view options) const {
  return absl::StrCat("lazycl ", LAZYCL_VERSION_STRING, "\nplatform: ", identity_.platform_name,
                      "\ndevice: ", identity_.device_name, "\ndriver: ", identity_.driver_version,
                      "\noptions: ", base::Sv(options), "\nsource:\n", base::Sv(source));
}

std::string ProgramCache::CachePath(std::string_view source, std::string_view options) const {
  if (cache_dir_.empty()) return "";
  return absl::StrCat(cache_dir_, "/", StableHashHex(KeyText(source, options)), ".bin");
}

absl::StatusOr<cl::Program> ProgramCache::BuildFromSource(std::string_view source,
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
  const std::string options_text =
      debug_ >= 1 ? std::string(options)
                  : absl::StrCat(base::Sv(options), options.empty() ? "" : " ", "-w");
  base::metrics::Add("ProgramBuilds", 1);
  err = program.build({device_}, options_text.c_str());
  base::metrics::RecordTime("CompileTime", NanosSince(start));
  if (err != CL_SUCCESS) {
    cl_int log_err = CL_SUCCESS;
    std::string log = program.getBuildInfo<CL_PROGRAM_BUILD_LOG>(device_, &log_err);
    return absl::InvalidArgumentError(
        absl::StrCat("OpenCL program ", hash, " failed to build: ", base::Sv(ClErrorName(err)),
                     " (", err, ")\noptions: ", base::Sv(options), "\n--- build log ---\n", log,
                     "\n--- source ---\n", NumberedSource(source)));
  }
  if (debug_ >= 1) {
    std::fprintf(stderr, "lazycl: built program %s in %.1f ms\n", hash.c_str(), MsSince(start));
    cl_int log_err = CL_SUCCESS;
    const std::string log = program.getBuildInfo<CL_PROGRAM_BUILD_LOG>(device_, &log_err);
    if (log_err == CL_SUCCESS && log.find_first_not_of(" \t\r\n") != std::string::npos) {
      std::fprintf(stderr, "lazycl: build log of program %s:\n%s\n", hash.c_str(), log.c_str());
    }
  }
  return program;
}

bool ProgramCache::LoadFromDisk(const std::string& path, const std::string& key,
                                std::string_view options, const std::string& hash,
                                cl::Program* program) {
  std::error_code ec;
  const std::string marker = path + ".loading";
  const auto start = std::chrono::steady_clock::now();
  // An unusable entry is removed (remove_all: it may be a directory; a symlink is removed, not
  // what it points to) so that the rebuilt program takes its place.
  auto reject = [&](std::string_view why) {
    if (debug_ >= 1) {
      std::fprintf(stderr, "lazycl: discarding disk cache entry %s: %.*s\n", path.c_str(),
                   static_cast<int>(why.size()), why.data());
    }
    std::filesystem::remove_all(path, ec);
    return false;
  };
  std::string data;
  std::string why;
  switch (ReadEntry(path, &data, &why)) {
    case EntryRead::kMissing:
      return false;
    case EntryRead::kUnusable:
      return reject(why);
    case EntryRead::kRead:
      break;
  }
  Header header;
  if (data.size() < sizeof(header)) return reject("truncated header");
  std::memcpy(&header, data.data(), sizeof(header));
  if (std::memcmp(header.magic, kMagic, sizeof(kMagic)) != 0) return reject("bad magic");
  if (header.format_version != kFormatVersion) return reject("other format version");
  if (header.key_bytes != key.size() ||
      data.size() != sizeof(header) + header.key_bytes + header.payload_bytes) {
    return reject("wrong length");
  }
  if (std::string_view(data).substr(sizeof(header), key.size()) != key) {
    return reject("key mismatch");
  }
  std::string_view payload = std::string_view(data).substr(sizeof(header) + key.size());
  if (Fnv1a(payload, 0xcbf29ce484222325ULL) != header.payload_checksum) {
    return reject("checksum mismatch");
  }

  const LoadMark mark = MarkLoading(marker);
  if (mark == LoadMark::kDeadLoader) {
    std::filesystem::remove(marker, ec);
    return reject("a process died while loading it");
  }
  cl::Program::Binaries binaries{std::vector<unsigned char>(payload.begin(), payload.end())};
  std::vector<cl_int> binary_status;
  cl_int err = CL_SUCCESS;
  cl::Program loaded(context_, {device_}, binaries, &binary_status, &err);
  if (err == CL_SUCCESS) {
    const std::string options_text(options);
    err = loaded.build({device_}, options_text.c_str());
  }
  if (mark == LoadMark::kMarked) std::filesystem::remove(marker, ec);
  if (err != CL_SUCCESS) return reject(ClErrorName(err));
  base::metrics::Add("ProgramDiskCacheHits", 1);
  TouchDiskCacheEntry(path);
  base::metrics::RecordTime("CompileTime", NanosSince(start));
  if (debug_ >= 1) {
    std::fprintf(stderr, "lazycl: loaded program %s from disk cache in %.1f ms\n", hash.c_str(),
                 MsSince(start));
  }
  *program = std::move(loaded);
  return true;
}

void ProgramCache::SaveToDisk(const std::string& path, const std::string& key,
                              const cl::Program& program) {
  // The disk cache is an optimisation: any failure here means "not cached", never an error.
  cl_int err = CL_SUCCESS;
  cl::Program::Binaries binaries = program.getInfo<CL_PROGRAM_BINARIES>(&err);
  if (err != CL_SUCCESS || binaries.size() != 1 || binaries[0].empty()) return;
  std::string_view payload(reinterpret_cast<const char*>(binaries[0].data()), binaries[0].size());

  std::error_code ec;
  std::filesystem::create_directories(cache_dir_, ec);
  if (ec) return;

  Header header;
  std::memcpy(header.magic, kMagic, sizeof(kMagic));
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
      return;
    }
  }
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    std::filesystem::remove(temp, ec);
    return;
  }
  if (const int deleted = TrimDiskCache(cache_dir_, limits_.disk_bytes); deleted > 0) {
    base::metrics::Add("ProgramDiskCacheEvictions", deleted);
  }
}

absl::StatusOr<KernelRef> ProgramCache::GetKernel(std::string_view source, std::string_view options,
                                                  std::string_view name) {
  // One build at a time per device: a second thread asking for the same program waits for the
  // first one's build rather than building it again.
  std::lock_guard<std::mutex> lock(mu_);
  std::string memory_key =
      absl::StrCat(base::Sv(options), absl::string_view("\0", 1), base::Sv(source));
  auto it = programs_.find(memory_key);
  if (it == programs_.end()) {
    if (base::fault::ShouldFail(base::fault::Site::kBuild)) {
      return ClStatus(CL_BUILD_PROGRAM_FAILURE, "clBuildProgram (injected fault)");
    }
    const std::string key = KeyText(source, options);
    auto entry = std::make_unique<Program>();
    entry->hash = StableHashHex(key);
    const std::string path = CachePath(source, options);
    if (path.empty() || !LoadFromDisk(path, key, options, entry->hash, &entry->program)) {
      absl::StatusOr<cl::Program> built = BuildFromSource(source, options, entry->hash);
      if (!built.ok()) return built.status();
      entry->program = *std::move(built);
      if (!path.empty()) SaveToDisk(path, key, entry->program);
    }
    entry->last_use = ++use_clock_;
    programs_.emplace(memory_key, std::move(entry));
    EvictLocked();  // never the new entry: it is the most recently used
    it = programs_.find(memory_key);
  }

  Program& program = *it->second;
  program.last_use = ++use_clock_;
  auto kernel_it = program.kernels.find(base::Sv(name));
  if (kernel_it != program.kernels.end()) return kernel_it->second;
  cl_int err = CL_SUCCESS;
  const std::string name_text(name);
  cl::Kernel kernel(program.program, name_text.c_str(), &err);
  if (err == CL_INVALID_KERNEL_NAME) {
    cl_int names_err = CL_SUCCESS;
    std::string names = program.program.getInfo<CL_PROGRAM_KERNEL_NAMES>(&names_err);
    return absl::NotFoundError(absl::StrCat("no kernel named '", base::Sv(name),
                                            "' in OpenCL program ", program.hash,
                                            "; it defines: ", names));
  }
  if (err != CL_SUCCESS)
    return ClStatus(err, absl::StrCat("clCreateKernel('", base::Sv(name), "')"));
  KernelRef result = std::make_shared<const Kernel>(std::move(kernel), name_text);
  program.kernels.emplace(name_text, result);
  return result;
}

}  // namespace lazycl::backend
