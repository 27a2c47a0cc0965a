#include "lazycl/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/host_memory.h"
#include "base/file.h"
#include "base/status.h"
#include "frontend/dispatch.h"
#include "frontend/safetensors.h"
#include "frontend/tensor_impl.h"
#include "runtime/devices.h"
#include "runtime/storage.h"

namespace lazycl {
namespace {

namespace st = frontend::safetensors;

constexpr size_t kChunk = size_t{16} << 20;  // bytes copied at once from a file to a file

absl::Status WithOp(absl::string_view op, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(op, ": ", s.message()));
}

[[noreturn]] void Fail(absl::string_view op, const absl::Status& s) { base::Throw(WithOp(op, s)); }

// The file `path` + ".tmp", written then renamed over `path`; removed if it is not committed.
class AtomicFile {
 public:
  explicit AtomicFile(const std::string& path) : path_(path), tmp_(path + ".tmp") {
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) Error(absl::StrCat("cannot create '", tmp_, "'"));
  }
  ~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
  }
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void Write(const void* data, size_t bytes) {
    const char* p = static_cast<const char*>(data);
    while (bytes > 0) {
      const ssize_t n = ::write(fd_, p, bytes);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) Error(absl::StrCat("cannot write '", tmp_, "'"));
      p += n;
      bytes -= static_cast<size_t>(n);
    }
  }

  void Commit() {
    if (::fsync(fd_) != 0) Error(absl::StrCat("cannot flush '", tmp_, "'"));
    const int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) Error(absl::StrCat("cannot close '", tmp_, "'"));
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
      Error(absl::StrCat("cannot rename '", tmp_, "' to '", path_, "'"));
    }
    committed_ = true;
  }

 private:
  [[noreturn]] void Error(const std::string& what) {
    base::ThrowInvalid("save_safetensors", absl::StrCat(what, ": ", base::ErrnoText(errno)));
  }
  std::string path_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

std::unique_ptr<char[]> Staging(size_t bytes) {
  std::unique_ptr<char[]> buf(new (std::nothrow) char[bytes]);
  if (buf == nullptr) base::Throw(base::HostOutOfMemory("save_safetensors", bytes));
  return buf;
}

template <class T>
void WriteValues(AtomicFile& out, const Tensor& t) {
  const std::vector<T> values = t.to_vector<T>();
  out.Write(values.data(), values.size() * sizeof(T));
}

// Writes the `bytes` bytes of `t`: straight from its file if it was loaded and never read
// since (no device transfer), else computed and read back (counted).
void WriteTensor(AtomicFile& out, const Tensor& t, size_t bytes) {
  const ir::NodePtr node = frontend::NodeOf(*t.impl());
  if (node->op == ir::Op::kBuffer && node->storage->bytes() == bytes) {
    std::optional<backend::HostSource> source =
        node->storage->manager().PendingSource(node->storage->id());
    if (source.has_value()) {
      std::unique_ptr<char[]> buf = Staging(std::min(bytes, kChunk));
      for (size_t done = 0; done < bytes; done += kChunk) {
        const size_t n = std::min(kChunk, bytes - done);
        if (absl::Status s = source->file->ReadAt(source->offset + done, buf.get(), n); !s.ok())
          Fail("save_safetensors", s);
        out.Write(buf.get(), n);
      }
      return;
    }
  }
  switch (t.dtype()) {
    case DType::f32:
      return WriteValues<float>(out, t);
    case DType::i32:
      return WriteValues<int32_t>(out, t);
    case DType::i64:
      return WriteValues<int64_t>(out, t);
    case DType::boolean:
      return WriteValues<uint8_t>(out, t);
    case DType::f16:
    case DType::bf16:
      return WriteValues<uint16_t>(out, t);
    case DType::f64:
      return WriteValues<double>(out, t);
  }
}

}  // namespace

std::map<std::string, Tensor> load_safetensors(const std::string& path, Device device) {
  constexpr const char* kOp = "load_safetensors";
  backend::BufferManager* manager =
      device.is_host() ? &backend::HostMemory() : &runtime::OpenClDevice(device.index()).buffers();
  absl::StatusOr<std::shared_ptr<const base::ReadOnlyFile>> opened = base::ReadOnlyFile::Open(path);
  if (!opened.ok()) Fail(kOp, opened.status());
  const std::shared_ptr<const base::ReadOnlyFile> file = *std::move(opened);

  std::string first(std::min<uint64_t>(8, file->size()), '\0');
  if (absl::Status s = file->ReadAt(0, first.data(), first.size()); !s.ok()) Fail(kOp, s);
  absl::StatusOr<uint64_t> n = st::HeaderLength(path, first, file->size());
  if (!n.ok()) Fail(kOp, n.status());
  std::string json;
  try {
    json.resize(*n);
  } catch (const std::bad_alloc&) {
    base::Throw(base::HostOutOfMemory(kOp, static_cast<int64_t>(*n)));
  }
  if (absl::Status s = file->ReadAt(8, json.data(), json.size()); !s.ok()) Fail(kOp, s);
  const uint64_t data_start = 8 + *n;
  absl::StatusOr<st::Header> header = st::ParseHeader(path, json, file->size() - data_start);
  if (!header.ok()) Fail(kOp, header.status());

  std::map<std::string, Tensor> tensors;
  for (const st::TensorInfo& info : header->tensors) {
    const size_t bytes = static_cast<size_t>(info.end - info.begin);
    auto storage = std::make_shared<ir::Storage>(
        device, manager, bytes,
        absl::StrCat("tensor '", info.name, "' ", dtype_name(info.dtype),
                     ir::ShapeString(info.shape), " of '", path, "'"),
        backend::HostSource{file, data_start + info.begin});
    tensors.emplace(info.name, frontend::MakeTensor(ir::MakeBuffer(std::move(storage), info.dtype,
                                                                   ir::Shape(info.shape)),
                                                    device));
  }
  return tensors;
}

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors) {
  constexpr const char* kOp = "save_safetensors";
  std::vector<st::TensorInfo> infos;
  std::vector<Tensor> to_compute;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name.empty()) {
      base::ThrowInvalid(kOp, "a tensor has the empty name \"\"; every tensor needs a name");
    }
    if (name == "__metadata__") {
      base::ThrowInvalid(kOp,
                         "the name '__metadata__' is reserved by the safetensors format for "
                         "the file's metadata; name the tensor otherwise");
    }
    if (!t.defined()) {
      base::ThrowInvalid(kOp, absl::StrCat("tensor '", name, "' is undefined (no value)"));
    }
    if (t.is_placeholder()) {
      base::ThrowInvalid(kOp, absl::StrCat("tensor '", name, "' (", t.str(),
                                           ") is a placeholder: it has no data to save"));
    }
    st::TensorInfo info;
    info.name = name;
    info.dtype = t.dtype();
    info.shape = t.shape();
    info.begin = offset;
    offset += static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype());
    info.end = offset;
    infos.push_back(std::move(info));
    to_compute.push_back(t);
  }
  absl::StatusOr<std::string> header = st::SerializeHeader(infos);
  if (!header.ok()) Fail(kOp, header.status());
  // Pending device tensors are computed together, as one graph per device.
  sync(to_compute);

  AtomicFile out(path);
  out.Write(header->data(), header->size());
  size_t k = 0;
  for (const auto& [name, t] : tensors) {
    WriteTensor(out, t, static_cast<size_t>(infos[k].end - infos[k].begin));
    ++k;
  }
  out.Commit();
}

}  // namespace lazycl
