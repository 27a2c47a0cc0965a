#include "lazycl/dist.h"

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "base/metrics_registry.h"
#include "lazycl/lazycl.h"

namespace lazycl::dist {
namespace {

constexpr size_t kBucketBytes = size_t{25} << 20;  // as PyTorch DDP's bucket_cap_mb

[[noreturn]] void Fail(const std::string& op, const std::string& what) {
  throw Error("dist::" + op + ": " + what);
}

void Check(const std::string& op, int code) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  Fail(op, std::string("MPI failed: ") + std::string(text, static_cast<size_t>(length)));
}

void RequireInit(const std::string& op) {
  if (!is_initialized()) Fail(op, "MPI is not initialized: call lazycl::dist::init() first");
}

std::string ShapeText(const Tensor& t) {
  std::string s = std::string(dtype_name(t.dtype())) + "[";
  const std::vector<int64_t> shape = t.shape();
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// What every rank must agree on before data moves: the op and each tensor's dtype and shape.
std::string Describe(const std::string& what, const std::vector<Tensor>& tensors) {
  std::string d = what + ":";
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].defined()) Fail(what, "tensor " + std::to_string(i) + " is undefined");
    if (tensors[i].is_placeholder()) {
      Fail(what, "tensor " + std::to_string(i) + " (" + tensors[i].str() +
                     ") is a placeholder: it has no data to send");
    }
    if (tensors[i].dtype() == DType::boolean) {
      Fail(what, "tensor " + std::to_string(i) + " is bool: cast it to a numeric dtype first");
    }
    d += " " + ShapeText(tensors[i]);
  }
  return d;
}

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

// Errors on every rank, naming each rank's tensors, unless all ranks describe the same call.
void Agree(const std::string& op, const std::string& description) {
  const uint64_t mine = Fnv1a(description);
  std::vector<uint64_t> all(static_cast<size_t>(world_size()));
  Check(op, MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD));
  bool same = true;
  for (uint64_t h : all) same = same && h == all[0];
  if (same) return;
  // Gather every rank's description for the message.
  const int length = static_cast<int>(description.size());
  std::vector<int> lengths(all.size()), offsets(all.size());
  Check(op, MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD));
  int total = 0;
  for (size_t r = 0; r < lengths.size(); ++r) {
    offsets[r] = total;
    total += lengths[r];
  }
  std::string text(static_cast<size_t>(total), '\0');
  Check(op, MPI_Allgatherv(description.data(), length, MPI_CHAR, text.data(), lengths.data(),
                           offsets.data(), MPI_CHAR, MPI_COMM_WORLD));
  std::string message = "the ranks pass different tensors (no data was moved):";
  for (size_t r = 0; r < lengths.size(); ++r) {
    message += "\n  rank " + std::to_string(r) + " " +
               text.substr(static_cast<size_t>(offsets[r]), static_cast<size_t>(lengths[r]));
  }
  Fail(op, message);
}

// The dtype a tensor travels in: f32 for f32 and the halves (which widen exactly), else its own
// (f64 in double: an f32 wire would round every f64 gradient).
DType Wire(DType d) { return is_half(d) ? DType::f32 : d; }

MPI_Datatype MpiType(DType d) {
  switch (d) {
    case DType::i32:
      return MPI_INT32_T;
    case DType::i64:
      return MPI_INT64_T;
    case DType::f64:
      return MPI_DOUBLE;
    default:
      return MPI_FLOAT;
  }
}

// A host vector as a 1-D tensor on `device` (one upload when it is a device).
Tensor Upload(std::vector<float> v, Device device) {
  const auto n = static_cast<int64_t>(v.size());
  return tensor(std::move(v), {n}, device);
}
Tensor Upload(std::vector<double> v, Device device) {
  const auto n = static_cast<int64_t>(v.size());
  return tensor(v, {n}, DType::f64, device);
}
Tensor Upload(std::vector<int32_t> v, Device device) {
  const auto n = static_cast<int64_t>(v.size());
  return tensor(std::move(v), {n}, device);
}
Tensor Upload(std::vector<int64_t> v, Device device) {
  const auto n = static_cast<int64_t>(v.size());
  return tensor(std::move(v), {n}, device);
}

// One bucket: its members' values in one host buffer of the wire type T, packed where they
// live (each run of members on one device flattened and concatenated there: one graph and one
// read per run, not one per tensor; unless `send` is false, a broadcast's receiver, which
// reads nothing), `collective` run on that buffer in place, and unless `write_back` is false
// (a broadcast's root), the result uploaded once per run and each member given its slice
// (scaled and cast back on the device).
template <class T, typename Collective>
void RunBucket(const std::string& op, std::vector<Tensor>& tensors,
               const std::vector<size_t>& members, DType wire, Collective& collective, bool send,
               bool write_back, double scale) {
  std::vector<std::pair<size_t, size_t>> runs;  // [begin, end) of members on one device
  for (size_t b = 0; b < members.size();) {
    size_t e = b + 1;
    while (e < members.size() && tensors[members[e]].device() == tensors[members[b]].device()) {
      ++e;
    }
    runs.emplace_back(b, e);
    b = e;
  }
  std::vector<T> values;
  for (const auto& [b, e] : runs) {
    if (!send) {
      for (size_t m = b; m < e; ++m) {
        values.resize(values.size() + static_cast<size_t>(tensors[members[m]].numel()));
      }
      continue;
    }
    std::vector<Tensor> parts;
    for (size_t m = b; m < e; ++m) parts.push_back(reshape(cast(tensors[members[m]], wire), {-1}));
    std::vector<T> v = (parts.size() == 1 ? parts[0] : cat(parts, 0)).template to_vector<T>();
    if (values.empty()) {
      values = std::move(v);
    } else {
      values.insert(values.end(), v.begin(), v.end());
    }
  }
  const auto start = std::chrono::steady_clock::now();
  Check(op, collective(values.data(), static_cast<int>(values.size()), MpiType(wire)));
  base::metrics::RecordTime("CollectiveTime", std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                  std::chrono::steady_clock::now() - start)
                                                  .count());
  base::metrics::Add("CollectiveCount", 1);
  base::metrics::Add("CollectiveBytes", static_cast<int64_t>(values.size() * sizeof(T)));
  if (!write_back) return;
  size_t at = 0;
  for (const auto& [b, e] : runs) {
    size_t n = 0;
    for (size_t m = b; m < e; ++m) n += static_cast<size_t>(tensors[members[m]].numel());
    const Tensor all = Upload(std::vector<T>(values.begin() + static_cast<std::ptrdiff_t>(at),
                                             values.begin() + static_cast<std::ptrdiff_t>(at + n)),
                              tensors[members[b]].device());
    int64_t offset = 0;
    for (size_t m = b; m < e; ++m) {
      Tensor& t = tensors[members[m]];
      Tensor part = reshape(slice(all, 0, offset, offset + t.numel()), t.shape());
      if (scale != 1) part = part * scale;
      t.copy_(cast(part, t.dtype()));
      offset += t.numel();
    }
    at += n;
  }
}

// Runs `collective(buffer, count, type)` over the tensors, bucket by bucket (RunBucket).
template <typename Collective>
void Bucketed(const std::string& op, std::vector<Tensor>& tensors, Collective collective, bool send,
              bool write_back, double scale) {
  for (DType wire : {DType::f32, DType::f64, DType::i32, DType::i64}) {
    size_t i = 0;
    while (i < tensors.size()) {
      // One bucket: consecutive tensors of this wire dtype, up to kBucketBytes (at least one).
      std::vector<size_t> members;
      size_t bytes = 0;
      for (; i < tensors.size(); ++i) {
        if (Wire(tensors[i].dtype()) != wire) continue;
        const size_t b = static_cast<size_t>(tensors[i].numel()) * dtype_size(wire);
        if (!members.empty() && bytes + b > kBucketBytes) break;
        members.push_back(i);
        bytes += b;
      }
      if (members.empty()) break;
      // Every rank has the same buckets (Agree), so all skip an empty one alike.
      if (bytes == 0) continue;
      if (wire == DType::f32) {
        RunBucket<float>(op, tensors, members, wire, collective, send, write_back, scale);
      } else if (wire == DType::f64) {
        RunBucket<double>(op, tensors, members, wire, collective, send, write_back, scale);
      } else if (wire == DType::i32) {
        RunBucket<int32_t>(op, tensors, members, wire, collective, send, write_back, scale);
      } else {
        RunBucket<int64_t>(op, tensors, members, wire, collective, send, write_back, scale);
      }
    }
  }
}

}  // namespace

bool is_initialized() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized != 0 && finalized == 0;
}

void init() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized != 0) return;
  int provided = 0;
  Check("init", MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided));
  // Errors come back as codes (lazycl::Error), not as MPI's default abort.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  std::atexit([] {
    if (is_initialized()) MPI_Finalize();
  });
}

void finalize() {
  if (is_initialized()) MPI_Finalize();
}

int rank() {
  RequireInit("rank");
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  RequireInit("world_size");
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

void all_reduce(std::vector<Tensor>& tensors, ReduceOp op) {
  RequireInit("all_reduce");
  const char* names[] = {"sum", "mean", "max"};
  const std::string description =
      Describe("all_reduce", tensors) + " op " + names[static_cast<int>(op)];
  for (const Tensor& t : tensors) {
    if (op == ReduceOp::mean && !is_floating(t.dtype()))
      Fail("all_reduce", "mean of " + t.str() + ": only floating tensors have a mean");
  }
  if (world_size() == 1) return;
  Agree("all_reduce", description);
  const MPI_Op mpi_op = op == ReduceOp::max ? MPI_MAX : MPI_SUM;
  Bucketed(
      "all_reduce", tensors,
      [&](void* data, int count, MPI_Datatype type) {
        return MPI_Allreduce(MPI_IN_PLACE, data, count, type, mpi_op, MPI_COMM_WORLD);
      },
      /*send=*/true, /*write_back=*/true, op == ReduceOp::mean ? 1.0 / world_size() : 1.0);
}

void broadcast(std::vector<Tensor>& tensors, int root) {
  RequireInit("broadcast");
  if (root < 0 || root >= world_size()) {
    Fail("broadcast", "root " + std::to_string(root) + " is not a rank (the world has " +
                          std::to_string(world_size()) + ")");
  }
  const std::string description = Describe("broadcast", tensors) + " root " + std::to_string(root);
  if (world_size() == 1) return;
  Agree("broadcast", description);
  Bucketed(
      "broadcast", tensors,
      [&](void* data, int count, MPI_Datatype type) {
        return MPI_Bcast(data, count, type, root, MPI_COMM_WORLD);
      },
      /*send=*/rank() == root, /*write_back=*/rank() != root, 1.0);
}

void abort(int code) {
  if (is_initialized()) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

void barrier() {
  RequireInit("barrier");
  Check("barrier", MPI_Barrier(MPI_COMM_WORLD));
}

}  // namespace lazycl::dist
