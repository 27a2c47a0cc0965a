#include <algorithm>
#include <exception>
#include <memory>
#include <mutex>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/metrics_registry.h"
#include "base/status.h"
#include "frontend/autograd.h"
#include "frontend/captures.h"
#include "frontend/deferred.h"
#include "frontend/dispatch.h"
#include "frontend/materialize.h"
#include "frontend/tensor_impl.h"
#include "frontend/trace_scope.h"
#include "frontend/user_code.h"
#include "ir/ir.h"
#include "ir/post_order.h"
#include "lazycl/autograd.h"
#include "lazycl/factories.h"
#include "lazycl/function.h"
#include "lazycl/ops.h"
#include "runtime/devices.h"
#include "runtime/executor.h"
#include "runtime/step_loop.h"

namespace lazycl {
namespace {

using base::Throw;
using base::ThrowIfError;

[[noreturn]] void Invalid(absl::string_view what) { base::ThrowInvalid("scan", what); }

std::string SpecString(const Tensor& t) {
  return absl::StrCat(dtype_name(t.dtype()), ir::ShapeString(t.shape()));
}

std::vector<int64_t> SliceShape(const Tensor& x) {
  std::vector<int64_t> shape = x.shape();
  shape.erase(shape.begin());
  return shape;
}

void CheckCarry(const std::vector<Tensor>& init, const std::vector<Tensor>& carry) {
  if (carry.size() != init.size()) {
    Invalid(absl::StrCat("the body returned ", carry.size(), " carry tensors, but the carry has ",
                         init.size()));
  }
  for (size_t i = 0; i < init.size(); ++i) {
    if (!carry[i].defined()) Invalid(absl::StrCat("the body returned an undefined carry ", i));
    if (carry[i].shape() != init[i].shape() || carry[i].dtype() != init[i].dtype()) {
      Invalid(absl::StrCat("the body returned carry ", i, " as ", SpecString(carry[i]),
                           " but it is ", SpecString(init[i]),
                           "; a scan body must keep each carry's shape and dtype"));
    }
  }
}

// The scan as the plain loop over its steps, on `device`: what a host scan is (host tensors are
// eager), and what a scan inside a traced body becomes (unrolled into the trace).
ScanResult UnrolledScan(const ScanFn& fn, std::vector<Tensor> init, const std::vector<Tensor>& xs,
                        int64_t steps, bool reverse, Device device) {
  std::vector<Tensor> carry = init;
  std::vector<std::vector<Tensor>> ys;
  // With no steps, one run on zeros tells the shapes of ys. The zeros of a floating xs are its
  // sum over the empty dim 0, and each ys an empty slice of the body's y: the results stay in
  // the graph of init, xs and what the body captures, whose gradients (zeros, or the carry's
  // own) flow as on a device.
  const int64_t runs = steps == 0 ? 1 : steps;
  for (int64_t s = 0; s < runs; ++s) {
    const int64_t t = reverse ? runs - 1 - s : s;
    std::vector<Tensor> x;
    for (const Tensor& full : xs) {
      if (steps > 0) {
        x.push_back(squeeze(slice(full, 0, t, t + 1), 0));
      } else if (is_floating(full.dtype())) {
        x.push_back(sum(full, {0}, false));
      } else {
        x.push_back(zeros(SliceShape(full), full.dtype(), device));
      }
    }
    auto [next, y] = frontend::RunUserCode(absl::StrCat("scan: the body, at step ", t, ","),
                                           [&] { return fn(carry, x); });
    CheckCarry(init, next);
    if (steps == 0) {
      // The carry is init, in the graph of what the body read too (as on a device, where the
      // scan records all its inputs): where(true, init, next) is init's bits, and next's
      // gradient is zeros.
      const Tensor keep = full({}, 1, DType::boolean, device);
      for (size_t i = 0; i < init.size(); ++i) {
        if (is_floating(init[i].dtype())) carry[i] = where(keep, init[i], next[i]);
      }
      for (const Tensor& yk : y) ys.push_back({slice(unsqueeze(yk, 0), 0, 0, 0)});
      break;
    }
    carry = std::move(next);
    if (ys.empty()) ys.resize(y.size());
    if (y.size() != ys.size())
      Invalid("the body returned a different number of ys at another step");
    for (size_t k = 0; k < y.size(); ++k) ys[k].push_back(y[k]);
  }
  ScanResult result;
  result.carry = carry;
  for (auto& parts : ys) {
    if (reverse && steps > 0) std::reverse(parts.begin(), parts.end());
    result.ys.push_back(steps == 0 ? parts[0] : stack(parts, 0));
  }
  return result;
}

// A device tensor holding `t`'s value as a computed buffer.
Tensor OnDevice(const Tensor& t, Device device, int operand) {
  return frontend::Wrap(frontend::NodeOn(t, device, "scan", operand), device);
}

Tensor TraceInput(std::vector<int64_t> shape, DType dtype, Device device,
                  const ScanOptions& options) {
  if (options.trace_on_materialized_inputs)
    return zeros(std::move(shape), dtype, Device::host()).to(device);
  return placeholder(std::move(shape), dtype, device);
}

// A placeholder has nothing to scan over: say so before anything is compiled or run (sync leaves
// a bare placeholder as it is, since it has no pending work).
void CheckNotPlaceholders(const std::vector<Tensor>& inputs, Device device) {
  for (const Tensor& t : inputs) {
    const ir::NodePtr node = frontend::NodeOf(*t.impl());
    const ir::Node& leaf = *node;
    if (leaf.op != ir::Op::kBuffer || !leaf.storage->placeholder() ||
        leaf.storage->manager().IsWritten(leaf.storage->id()))
      continue;
    base::Throw(absl::FailedPreconditionError(
        absl::StrCat("scan: ", runtime::PlaceholderMessage(leaf, device))));
  }
}

// What the scan reads, inspected before it is deferred: a placeholder the body captured (read,
// not taken as a carry or an xs slice) has no data for the steps to compute with, said now rather
// than when a result is first read; the pending work it reads (through its inputs or captures)
// gives the depth of its own Producer (frontend/deferred.h).
int DeferredDepth(const runtime::StepLoop& loop, const std::vector<Tensor>& inputs, Device device) {
  absl::flat_hash_set<const ir::Storage*> body_inputs;
  for (const ir::NodePtr& n : loop.carry_in) body_inputs.insert(n->storage.get());
  for (const ir::NodePtr& n : loop.x_in) body_inputs.insert(n->storage.get());
  std::vector<std::shared_ptr<ir::Storage>> pending;
  auto note_pending = [&](const ir::Node& n) {
    if (!n.storage->pending()) return false;
    pending.push_back(n.storage);
    return true;
  };
  for (const ir::Node* n : ir::PostOrder(loop.outputs)) {
    if (n->op != ir::Op::kBuffer || note_pending(*n) || body_inputs.contains(n->storage.get()) ||
        !n->storage->placeholder() || n->storage->manager().IsWritten(n->storage->id()))
      continue;
    base::Throw(absl::FailedPreconditionError(
        absl::StrCat("scan: the body reads a placeholder it captured (",
                     n->storage->manager().Label(n->storage->id()),
                     "): ", runtime::PlaceholderMessage(*n, device))));
  }
  std::vector<ir::NodePtr> roots;
  for (const Tensor& t : inputs) roots.push_back(frontend::NodeOf(*t.impl()));
  for (const ir::Node* n : ir::PostOrder(roots)) {
    if (n->op == ir::Op::kBuffer) note_pending(*n);
  }
  return frontend::DeferredDepth(pending, "ScanChainsCut");
}

// The deferred run of a device scan (its Producer): computes the inputs, then the steps into the
// declared results that someone still holds. Leaves nothing half-done queued on failure.
absl::Status RunDeferred(runtime::StepLoop& loop, const std::vector<Tensor>& inputs,
                         const std::vector<std::weak_ptr<ir::Storage>>& carry_out,
                         const std::vector<std::weak_ptr<ir::Storage>>& stacked_out,
                         Device device) {
  std::vector<TensorImpl*> impls;
  for (const Tensor& t : inputs) impls.push_back(t.impl().get());
  absl::Status status = frontend::Materialize(impls, /*wait=*/false);
  for (size_t i = 0; status.ok() && i < inputs.size(); ++i) {
    const ir::NodePtr leaf = frontend::NodeOf(*inputs[i].impl());
    if (!leaf->storage->manager().IsWritten(leaf->storage->id())) {
      status = absl::FailedPreconditionError(
          absl::StrCat("scan: ", runtime::PlaceholderMessage(*leaf, device)));
    } else if (i < loop.carry_in.size()) {
      loop.init.push_back(leaf->storage);
    } else {
      loop.xs.push_back(leaf->storage);
    }
  }
  if (!status.ok()) {
    (void)runtime::OpenClDevice(device.index()).Finish();
    return status;
  }
  for (const auto& w : carry_out) loop.carry_out.push_back(w.lock());
  for (const auto& w : stacked_out) loop.stacked_out.push_back(w.lock());
  absl::StatusOr<runtime::StepLoopResult> run = runtime::RunStepLoop(loop);
  return run.ok() ? absl::OkStatus() : run.status();
}

// A scan's final carries as its last step (runtime/storage.h: Producer::LastStepOf): the steps
// before the last, deferred like the scan itself, and the traced body on their carries and the
// last slice of xs. Made on the first request of a reader that needs only part of a carry (a
// language model's next token: the last layer for one position), and shared by the carries.
struct LastStep {
  std::mutex mu;
  runtime::StepLoop loop;               // the scan's, not yet run
  std::vector<Tensor> inputs;           // init, then xs; on the device
  std::vector<ir::NodePtr> carries;     // the body's new carries
  std::vector<const ir::Storage*> ids;  // the final carries' storages (identity only)
  Device device = Device::host();
  int depth = 1;
  std::vector<ir::NodePtr> made;  // each carry's last step, once made
};

absl::StatusOr<ir::NodePtr> MakeLastStep(LastStep& s, const ir::Storage& storage) {
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.made.empty()) {
    runtime::StepLoop before = s.loop;
    before.steps = s.loop.steps - 1;
    before.first = s.loop.reverse ? 1 : 0;
    absl::flat_hash_map<const ir::Node*, ir::NodePtr> replace;
    std::vector<std::shared_ptr<ir::Storage>> storages;
    for (size_t i = 0; i < s.carries.size(); ++i) {
      const ir::Node& c = *s.carries[i];
      const size_t bytes = static_cast<size_t>(ir::NumElements(c.shape)) * dtype_size(c.dtype);
      storages.push_back(
          frontend::NewStorage(s.device, bytes,
                               absl::StrCat("scan carry ", i, " before the last step ",
                                            dtype_name(c.dtype), ir::ShapeString(c.shape))));
      replace[s.loop.carry_in[i].get()] = ir::MakeBuffer(storages.back(), c.dtype, c.shape);
    }
    const int64_t t = s.loop.reverse ? 0 : s.loop.steps - 1;
    for (size_t j = 0; j < s.loop.x_in.size(); ++j) {
      const ir::NodePtr xs = frontend::NodeOf(*s.inputs[s.carries.size() + j].impl());
      std::vector<int64_t> starts(xs->shape.size(), 0), shape = xs->shape;
      starts[0] = t;
      shape[0] = 1;
      absl::StatusOr<ir::NodePtr> part = ir::MakeSlice(xs, std::move(starts), std::move(shape));
      ThrowIfError(part.status());
      absl::StatusOr<ir::NodePtr> x = ir::MakeReshape(*std::move(part), s.loop.x_in[j]->shape);
      ThrowIfError(x.status());
      replace[s.loop.x_in[j].get()] = *std::move(x);
    }
    std::vector<std::weak_ptr<ir::Storage>> carry_out(storages.begin(), storages.end());
    auto producer = std::make_shared<ir::Producer>(
        [before, inputs = s.inputs, carry_out = std::move(carry_out), device = s.device]() mutable
        -> absl::Status { return RunDeferred(before, inputs, carry_out, {}, device); },
        s.depth);
    for (const std::shared_ptr<ir::Storage>& storage : storages) storage->set_producer(producer);
    base::metrics::Add("ScanLastStepsMade", 1);
    // The steps before the last are queued now: the device runs them while the host builds the
    // last step and the graph that reads it (a failed run fails this read, and every later one
    // of the steps' carries, with its error).
    if (absl::Status run = producer->Run(); !run.ok()) return run;
    s.made = ir::Substitute(s.carries, replace);
  }
  for (size_t i = 0; i < s.ids.size(); ++i) {
    if (s.ids[i] == &storage) return s.made[i];
  }
  return nullptr;
}

// The body traced once on placeholders (or zeros) of one step's carries and xs slices.
struct TracedBody {
  std::vector<Tensor> carry_in, x_in;
  // The new carries, then the ys, then (when recording) every step's carry, to save for the
  // backward as extra stacked ys; all on the device.
  std::vector<Tensor> outputs;
  size_t num_ys = 0;
};

TracedBody TraceBody(const ScanFn& fn, const std::vector<Tensor>& init_d,
                     const std::vector<Tensor>& xs_d, Device device, const ScanOptions& options,
                     bool record) {
  TracedBody body;
  frontend::TraceScope scope(frontend::TraceScope::Kind::kScanBody);
  for (const Tensor& c : init_d)
    body.carry_in.push_back(TraceInput(c.shape(), c.dtype(), device, options));
  for (const Tensor& x : xs_d)
    body.x_in.push_back(TraceInput(SliceShape(x), x.dtype(), device, options));
  auto [carry_out, ys_out] = frontend::RunUserCode("scan: the body, while traced,",
                                                   [&] { return fn(body.carry_in, body.x_in); });
  CheckCarry(init_d, carry_out);
  for (size_t k = 0; k < ys_out.size(); ++k) {
    if (!ys_out[k].defined()) Invalid(absl::StrCat("the body returned an undefined y ", k));
  }
  body.num_ys = ys_out.size();
  body.outputs = std::move(carry_out);
  body.outputs.insert(body.outputs.end(), ys_out.begin(), ys_out.end());
  if (record) body.outputs.insert(body.outputs.end(), body.carry_in.begin(), body.carry_in.end());
  for (size_t k = 0; k < body.outputs.size(); ++k) {
    if (body.outputs[k].device() != device)
      body.outputs[k] = OnDevice(body.outputs[k], device, static_cast<int>(k));
  }
  return body;
}

// The backward of a device scan: a reverse scan whose carry is the adjoint of the carry and
// whose xs are the saved per-step carries, the xs and the adjoints of the ys; its body is the
// VJP (Backprop) of the traced forward body at step t, and its ys are the adjoints of the xs
// slices, stacked. Only floating carries, xs and ys take part in the adjoint flow; the others
// are still read for their values. Tensors the body captured (frontend/captures.h) are inputs
// after init and xs: the reverse scan carries one more adjoint per capture, to which each step
// adds its own (a weight shared by every step gets the sum over the steps).
class ScanGradFn : public frontend::GradFn {
 public:
  std::vector<ir::NodePtr> carry_in, x_in;  // the forward body's placeholders
  std::vector<ir::NodePtr> body;            // its outputs: new carries, then ys
  std::vector<ir::NodePtr> capture_nodes;   // read by the body; inputs after init and xs
  std::vector<Tensor> saved_carries;        // [steps, carry shape] per carry
  std::vector<Tensor> xs;                   // on the device
  std::vector<std::vector<int64_t>> ys_shapes;
  Device device = Device::host();
  int64_t steps = 0;

  int num_outputs() const override { return static_cast<int>(body.size()); }

  std::vector<Tensor> Backward(const std::vector<Tensor>& adj) override {
    const size_t nc = carry_in.size(), nx = x_in.size(), ny = ys_shapes.size();
    std::vector<size_t> fc, fx, fy;  // floating carries, xs, ys
    for (size_t i = 0; i < nc; ++i)
      if (is_floating(carry_in[i]->dtype)) fc.push_back(i);
    for (size_t j = 0; j < nx; ++j)
      if (is_floating(x_in[j]->dtype)) fx.push_back(j);
    for (size_t k = 0; k < ny; ++k)
      if (is_floating(body[nc + k]->dtype)) fy.push_back(k);
    auto adjoint_or_zeros = [&](size_t out, const std::vector<int64_t>& shape) {
      const Tensor& a = adj[out];
      return a.defined() ? a : frontend::ZerosOn(shape, body[out]->dtype, device);
    };
    const size_t ncap = capture_nodes.size();
    std::vector<Tensor> init;
    for (size_t i : fc) init.push_back(adjoint_or_zeros(i, carry_in[i]->shape));
    for (const ir::NodePtr& c : capture_nodes)
      init.push_back(frontend::ZerosOn(c->shape, c->dtype, device));
    std::vector<Tensor> result(nc + nx + ncap);
    if (steps == 0) {  // the carry went through untouched
      for (size_t t = 0; t < fc.size(); ++t) result[fc[t]] = init[t];
    } else {
      std::vector<Tensor> bxs = saved_carries;
      bxs.insert(bxs.end(), xs.begin(), xs.end());
      for (size_t k : fy) bxs.push_back(adjoint_or_zeros(nc + k, ys_shapes[k]));
      ScanFn vjp = [&](const std::vector<Tensor>& dc, const std::vector<Tensor>& in) {
        absl::flat_hash_map<const ir::Node*, ir::NodePtr> replace;
        for (size_t i = 0; i < nc; ++i)
          replace[carry_in[i].get()] = frontend::NodeOf(*in[i].impl());
        for (size_t j = 0; j < nx; ++j)
          replace[x_in[j].get()] = frontend::NodeOf(*in[nc + j].impl());
        const std::vector<ir::NodePtr> outs = ir::Substitute(body, replace);
        std::vector<ir::NodePtr> seeds(outs.size());
        for (size_t t = 0; t < fc.size(); ++t) seeds[fc[t]] = frontend::NodeOf(*dc[t].impl());
        for (size_t t = 0; t < fy.size(); ++t)
          seeds[nc + fy[t]] = frontend::NodeOf(*in[nc + nx + t].impl());
        std::vector<ir::NodePtr> targets;
        for (size_t i : fc) targets.push_back(frontend::NodeOf(*in[i].impl()));
        for (size_t j : fx) targets.push_back(frontend::NodeOf(*in[nc + j].impl()));
        for (const ir::NodePtr& c : capture_nodes) targets.push_back(c);
        std::vector<ir::NodePtr> adjoints = ir::Backprop(outs, seeds, targets, {});
        auto wrap = [&](size_t t, const ir::NodePtr& like) {
          return adjoints[t] ? frontend::Wrap(adjoints[t], device)
                             : frontend::ZerosOn(like->shape, like->dtype, device);
        };
        std::vector<Tensor> new_carry, dxs;
        for (size_t t = 0; t < fc.size(); ++t) new_carry.push_back(wrap(t, carry_in[fc[t]]));
        for (size_t t = 0; t < fx.size(); ++t) dxs.push_back(wrap(fc.size() + t, x_in[fx[t]]));
        for (size_t c = 0; c < ncap; ++c) {
          const ir::NodePtr& a = adjoints[fc.size() + fx.size() + c];
          const Tensor& sum_so_far = dc[fc.size() + c];
          new_carry.push_back(a ? sum_so_far + frontend::Wrap(a, device) : sum_so_far);
        }
        return std::make_pair(new_carry, dxs);
      };
      ScanOptions options;
      options.reverse = true;
      ScanResult back = scan(vjp, init, bxs, options);
      for (size_t t = 0; t < fc.size(); ++t) result[fc[t]] = back.carry[t];
      for (size_t t = 0; t < fx.size(); ++t) result[nc + fx[t]] = back.ys[t];
      for (size_t c = 0; c < ncap; ++c) result[nc + nx + c] = back.carry[fc.size() + c];
    }
    for (size_t i = 0; i < result.size(); ++i) {
      if (result[i].defined() && inputs[i]->device != device)
        result[i] = result[i].to(inputs[i]->device);
    }
    return result;
  }
};

}  // namespace

ScanResult scan(ScanFn fn, std::vector<Tensor> init, std::vector<Tensor> xs, ScanOptions options) {
  if (!fn) Invalid("the body is empty");
  if (xs.empty()) Invalid("xs is empty; scan needs at least one tensor to iterate over");
  std::vector<const Tensor*> operands;
  for (size_t i = 0; i < init.size(); ++i) {
    frontend::ImplOf(init[i], "scan");
    operands.push_back(&init[i]);
  }
  for (size_t j = 0; j < xs.size(); ++j) {
    frontend::ImplOf(xs[j], "scan");
    if (xs[j].dim() < 1)
      Invalid(
          absl::StrCat("xs ", j, " is a scalar; every xs tensor needs a leading dim to scan over"));
    if (xs[j].size(0) != xs[0].size(0)) {
      Invalid(absl::StrCat("xs ", j, " has ", xs[j].size(0), " steps along dim 0 but xs 0 has ",
                           xs[0].size(0)));
    }
    operands.push_back(&xs[j]);
  }
  const int64_t steps = xs[0].size(0);
  const Device device = frontend::OpDevice(operands, "scan");
  // Inside a traced body (trace, call, or another scan's body) the scan is unrolled into the
  // trace: its operands are computed from the trace's placeholders, which have no values yet.
  if (device.is_host() || frontend::TraceScope::active()) {
    return UnrolledScan(fn, std::move(init), xs, steps, options.reverse, device);
  }
  bool record = false;
  for (const Tensor* t : operands) record = record || t->requires_grad();
  record = record && is_grad_enabled();

  // The inputs stay as they are (pending or not): the scan is deferred. What it will compute is
  // settled now (the body is traced, its errors thrown here), and its results are declared as
  // buffers whose Producer runs the steps when one of them is first needed (a graph reads it,
  // it is read back, another scan reads it), like any other lazy value.
  std::vector<Tensor> init_d, xs_d;
  for (size_t i = 0; i < init.size(); ++i)
    init_d.push_back(OnDevice(init[i], device, static_cast<int>(i)));
  for (size_t j = 0; j < xs.size(); ++j)
    xs_d.push_back(OnDevice(xs[j], device, static_cast<int>(init.size() + j)));
  std::vector<Tensor> all = init_d;
  all.insert(all.end(), xs_d.begin(), xs_d.end());
  CheckNotPlaceholders(all, device);

  TracedBody body = TraceBody(fn, init_d, xs_d, device, options, record);
  std::vector<ir::NodePtr> body_inputs;
  for (const Tensor& c : body.carry_in) body_inputs.push_back(frontend::NodeOf(*c.impl()));
  for (const Tensor& x : body.x_in) body_inputs.push_back(frontend::NodeOf(*x.impl()));
  const size_t num_body_outputs = init_d.size() + body.num_ys;
  frontend::Captures captures = frontend::FindCaptures(
      std::vector<Tensor>(body.outputs.begin(), body.outputs.begin() + num_body_outputs),
      body_inputs);
  if (!captures.tensors.empty() && !record && is_grad_enabled()) {
    // The backward needs every step's carry, as when an input requires grad.
    record = true;
    body.outputs.insert(body.outputs.end(), body.carry_in.begin(), body.carry_in.end());
  }
  const size_t num_ys = body.num_ys;
  std::vector<ir::NodePtr> out_nodes;
  for (const Tensor& out : body.outputs) out_nodes.push_back(frontend::NodeOf(*out.impl()));
  runtime::StepLoop loop;
  loop.device = device.index();
  loop.outputs = runtime::DistinctOutputs(std::move(out_nodes));
  for (const Tensor& c : body.carry_in) loop.carry_in.push_back(frontend::NodeOf(*c.impl()));
  for (const Tensor& x : body.x_in) loop.x_in.push_back(frontend::NodeOf(*x.impl()));
  loop.steps = steps;
  loop.reverse = options.reverse;
  const int depth = DeferredDepth(loop, all, device);

  // The results, declared: the final carries (the init itself when there are no steps) and the
  // stacked outputs (the ys, then the per-step carries saved for the backward).
  ScanResult result;
  std::vector<ir::NodePtr> stacked;
  std::vector<std::shared_ptr<ir::Storage>> declared;
  auto declare = [&](const ir::Node& like, std::vector<int64_t> shape, std::string label) {
    const size_t bytes = static_cast<size_t>(ir::NumElements(shape)) * dtype_size(like.dtype);
    std::shared_ptr<ir::Storage> storage = frontend::NewStorage(
        device, bytes, absl::StrCat(label, " ", dtype_name(like.dtype), ir::ShapeString(shape)));
    declared.push_back(storage);
    return ir::MakeBuffer(std::move(storage), like.dtype, std::move(shape));
  };
  const size_t num_carries = init_d.size();
  for (size_t i = 0; i < num_carries; ++i) {
    if (steps == 0) {
      result.carry.push_back(frontend::MakeTensor(frontend::NodeOf(*init_d[i].impl()), device));
    } else {
      const ir::Node& c = *loop.outputs[i];
      result.carry.push_back(
          frontend::MakeTensor(declare(c, c.shape, absl::StrCat("scan carry ", i)), device));
    }
  }
  const size_t num_carries_declared = declared.size();
  for (size_t k = num_carries; k < loop.outputs.size(); ++k) {
    const ir::Node& y = *loop.outputs[k];
    std::vector<int64_t> shape = y.shape;
    shape.insert(shape.begin(), steps);
    stacked.push_back(declare(y, std::move(shape), absl::StrCat("scan ys ", k - num_carries)));
  }
  for (size_t k = 0; k < num_ys; ++k) result.ys.push_back(frontend::MakeTensor(stacked[k], device));

  // The producer holds the declared storages weakly (they hold it): a result nobody holds any
  // more is written to a buffer of the step loop's own, then dropped.
  std::vector<std::weak_ptr<ir::Storage>> carry_out(declared.begin(),
                                                    declared.begin() + num_carries_declared);
  std::vector<std::weak_ptr<ir::Storage>> stacked_out(declared.begin() + num_carries_declared,
                                                      declared.end());
  auto producer = std::make_shared<ir::Producer>(
      [loop, all, carry_out = std::move(carry_out), stacked_out = std::move(stacked_out),
       device]() mutable -> absl::Status {
        return RunDeferred(loop, all, carry_out, stacked_out, device);
      },
      depth);
  if (steps >= 2 && num_ys == 0 && !record) {
    // A reader that needs only part of a carry may compute the last step itself (LastStep);
    // not when ys are stacked or the steps recorded (those need every step in place).
    auto last = std::make_shared<LastStep>();
    last->loop = loop;
    last->inputs = all;
    for (size_t i = 0; i < num_carries; ++i)
      last->carries.push_back(frontend::NodeOf(*body.outputs[i].impl()));
    for (size_t i = 0; i < num_carries_declared; ++i) last->ids.push_back(declared[i].get());
    last->device = device;
    last->depth = depth;
    producer->set_last_step([last](const ir::Storage& storage) -> absl::StatusOr<ir::NodePtr> {
      return MakeLastStep(*last, storage);
    });
  }
  for (const std::shared_ptr<ir::Storage>& storage : declared) storage->set_producer(producer);
  base::metrics::Add("ScansDeferred", 1);

  if (record) {
    auto grad_fn = std::make_shared<ScanGradFn>();
    grad_fn->carry_in = loop.carry_in;
    grad_fn->x_in = loop.x_in;
    for (size_t k = 0; k < init_d.size() + num_ys; ++k) grad_fn->body.push_back(loop.outputs[k]);
    for (size_t i = 0; i < init_d.size(); ++i)
      grad_fn->saved_carries.push_back(frontend::MakeTensor(stacked[num_ys + i], device));
    grad_fn->xs = xs_d;
    for (size_t k = 0; k < num_ys; ++k) grad_fn->ys_shapes.push_back(stacked[k]->shape);
    grad_fn->device = device;
    grad_fn->steps = steps;
    for (const Tensor& t : init) grad_fn->inputs.push_back(t.impl());
    for (const Tensor& t : xs) grad_fn->inputs.push_back(t.impl());
    grad_fn->capture_nodes = std::move(captures.nodes);
    for (auto& c : captures.tensors) grad_fn->inputs.push_back(std::move(c));
    std::vector<Tensor> outputs_all = result.carry;
    outputs_all.insert(outputs_all.end(), result.ys.begin(), result.ys.end());
    frontend::RecordOutputs(outputs_all, std::move(grad_fn));
  }
  return result;
}

}  // namespace lazycl
