#include "lazycl/dist.h"

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "base/metrics_registry.h"
#include "lazycl/lazycl.h"
#include "lazycl/memory.h"

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

// Where buckets are staged: pinned host memory of the device of the bucket's first tensor (the
// OpenCL copies into and out of it take the driver's direct path: DMA on a discrete GPU), kept
// from one call to the next and grown when a bucket needs more. Collectives are funnelled (one
// thread calls them), the mutex is for a caller that breaks that rule. Never destroyed: the
// devices it was allocated on live until exit too.
PinnedBuffer& Staging(Device device, size_t bytes) {
  static std::mutex mu;
  static auto* buffers = new std::map<std::string, PinnedBuffer>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = buffers->find(device.str());
  if (it == buffers->end() || it->second.size() < bytes) {
    if (it != buffers->end()) buffers->erase(it);  // freed before its successor is allocated
    it = buffers->emplace(device.str(), PinnedBuffer(bytes, device)).first;
  }
  return it->second;
}

template <class T>
void Scale(char* data, size_t n, double scale) {
  T* v = reinterpret_cast<T*>(data);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<T>(v[i] * scale);
}

// Runs `collective(buffer, count, type)` over the tensors, bucket by bucket, and writes each
// bucket's result back into its tensors (unless `write_back` is false: a broadcast's root).
// Each tensor crosses once each way, between its device buffer and its place in the staging
// memory (f16 and bf16 widened to f32 on the device first, and narrowed there after).
template <typename Collective>
void Bucketed(const std::string& op, std::vector<Tensor>& tensors, Collective collective,
              bool write_back, double scale) {
  NoGradGuard no_grad;
  sync(tensors);  // pending values computed together, not one graph per tensor
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
      char* const bucket = static_cast<char*>(Staging(tensors[members[0]].device(), bytes).data());
      size_t at = 0;
      for (size_t m : members) {
        const Tensor& t = tensors[m];
        const size_t b = static_cast<size_t>(t.numel()) * dtype_size(wire);
        (t.dtype() == wire ? t : cast(t, wire)).copy_to_host(bucket + at, b);
        at += b;
      }
      const auto start = std::chrono::steady_clock::now();
      const int count = static_cast<int>(bytes / dtype_size(wire));
      Check(op, collective(bucket, count, MpiType(wire)));
      base::metrics::RecordTime("CollectiveTime",
                                std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::chrono::steady_clock::now() - start)
                                    .count());
      base::metrics::Add("CollectiveCount", 1);
      base::metrics::Add("CollectiveBytes", static_cast<int64_t>(bytes));
      if (!write_back) continue;
      if (scale != 1) {
        if (wire == DType::f32) Scale<float>(bucket, bytes / sizeof(float), scale);
        if (wire == DType::f64) Scale<double>(bucket, bytes / sizeof(double), scale);
      }
      at = 0;
      for (size_t m : members) {
        Tensor& t = tensors[m];
        const size_t b = static_cast<size_t>(t.numel()) * dtype_size(wire);
        if (t.dtype() == wire) {
          t.copy_from_host(bucket + at, b);
        } else {
          t.copy_(cast(from_host_memory(bucket + at, b, t.shape(), wire, t.device()), t.dtype()));
        }
        at += b;
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
      /*write_back=*/true, op == ReduceOp::mean ? 1.0 / world_size() : 1.0);
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
      /*write_back=*/rank() != root, 1.0);
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
