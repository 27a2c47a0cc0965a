#include "runtime/step_loop.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backend/device.h"
#include "base/check.h"
#include "base/metrics_registry.h"
#include "ir/post_order.h"
#include "kernels/fusion_rules.h"
#include "runtime/devices.h"
#include "runtime/executor.h"

namespace lazycl::runtime {
namespace {

// What a parameter of the body graph is bound to at each step.
enum class Role { kCarry, kSlice, kCaptured };

// Loop-invariant work: a subexpression of the body that reads neither a carry nor a slice and
// costs at least one transcendental (kernels::kExpensivePerElement), or a matmul or reduction,
// such as the rotary tables a decoder layer captured still pending, is computed once before the
// steps and read by every step as a buffer, rather than computed again at every step. Cheap
// invariants (an iota mask, a view of a weight) stay fused where they are read. Returns the
// body's outputs with the hoisted nodes replaced (`hoisted` counts them).
absl::StatusOr<std::vector<ir::NodePtr>> HoistInvariants(const StepLoop& loop, int* hoisted) {
  absl::flat_hash_set<const ir::Storage*> per_step;
  for (const ir::NodePtr& n : loop.carry_in) per_step.insert(n->storage.get());
  for (const ir::NodePtr& n : loop.x_in) per_step.insert(n->storage.get());
  backend::BufferManager& buffers = OpenClDevice(loop.device).buffers();
  const std::vector<const ir::Node*> order = ir::PostOrder(loop.outputs);
  // Per node, by its position in `order` (operands come first): whether it varies with the
  // step, and the cost of its invariant subexpression (-1 when it reads a placeholder, which
  // the step loop reports, and cannot be computed ahead).
  absl::flat_hash_map<const ir::Node*, int> position;
  position.reserve(order.size());
  std::vector<uint8_t> varies(order.size());
  std::vector<int64_t> cost(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    const ir::Node* n = order[i];
    position.emplace(n, static_cast<int>(i));
    if (n->op == ir::Op::kBuffer) {
      varies[i] = per_step.contains(n->storage.get());
      // A captured result of a deferred scan is computed before this loop's steps.
      if (n->storage != nullptr && n->storage->pending()) {
        if (absl::Status s = n->storage->Produce(); !s.ok()) return s;
      }
      cost[i] = n->storage != nullptr && buffers.IsWritten(n->storage->id()) ? 0 : -1;
      continue;
    }
    bool v = false;
    int64_t c = ir::IsElementwise(n->op)                 ? kernels::OpCost(n->op)
                : ir::IsLeaf(n->op) || ir::IsView(n->op) ? 0
                                                         : kernels::kExpensivePerElement;
    for (const ir::NodePtr& o : n->operands) {
      const int at = position.at(o.get());
      v = v || varies[at];
      c = cost[at] < 0 || c < 0 ? -1 : std::min<int64_t>(c + cost[at], int64_t{1} << 30);
    }
    varies[i] = v;
    cost[i] = c;
  }
  std::vector<const ir::Node*> hoist;
  absl::flat_hash_set<const ir::Node*> chosen;
  for (size_t i = 0; i < order.size(); ++i) {
    if (!varies[i]) continue;
    for (const ir::NodePtr& o : order[i]->operands) {
      const ir::Node* x = o.get();
      const int at = position.at(x);
      if (varies[at] || ir::IsLeaf(x->op) || cost[at] < kernels::kExpensivePerElement) continue;
      // Below its views: a table broadcast over heads is computed once at its own size, and
      // the body reads it through the broadcast.
      while (ir::IsView(x->op) && !ir::IsLeaf(x->operands[0]->op)) x = x->operands[0].get();
      if (chosen.insert(x).second) hoist.push_back(x);
    }
  }
  *hoisted = static_cast<int>(hoist.size());
  if (hoist.empty()) return loop.outputs;
  absl::StatusOr<std::vector<std::shared_ptr<ir::Storage>>> values =
      Materialize(loop.device, hoist, /*wait=*/false);
  if (!values.ok()) return values.status();
  absl::flat_hash_map<const ir::Node*, ir::NodePtr> replace;
  for (size_t i = 0; i < hoist.size(); ++i)
    replace[hoist[i]] = ir::MakeBuffer((*values)[i], hoist[i]->dtype, hoist[i]->shape);
  return DistinctOutputs(ir::Substitute(loop.outputs, replace));
}

// Allocates the stacked outputs and runs the steps; does not wait for the device.
absl::StatusOr<StepLoopResult> RunSteps(const StepLoop& loop_in) {
  StepLoop loop = loop_in;
  int hoisted = 0;
  absl::StatusOr<std::vector<ir::NodePtr>> outputs = HoistInvariants(loop_in, &hoisted);
  if (!outputs.ok()) return outputs.status();
  loop.outputs = *std::move(outputs);
  base::metrics::Add("ScanHoistedNodes", hoisted);
  const size_t num_carries = loop.carry_in.size();
  LAZYCL_CHECK(loop.init.size() == num_carries && loop.xs.size() == loop.x_in.size() &&
                   loop.outputs.size() >= num_carries,
               "a step loop's carries, xs and outputs do not match");
  std::vector<const ir::Node*> raw;
  for (const ir::NodePtr& n : loop.outputs) raw.push_back(n.get());
  BuiltGraph built = BuildGraph(raw, /*bind_offsets=*/true);

  absl::flat_hash_map<const ir::Storage*, std::pair<Role, size_t>> role;
  for (size_t i = 0; i < num_carries; ++i)
    role[loop.carry_in[i]->storage.get()] = {Role::kCarry, i};
  for (size_t j = 0; j < loop.x_in.size(); ++j)
    role[loop.x_in[j]->storage.get()] = {Role::kSlice, j};
  for (const auto& storage : built.params) {
    if (role.contains(storage.get()) || storage->manager().IsWritten(storage->id())) continue;
    return absl::FailedPreconditionError(absl::StrCat(
        "scan: the body reads a placeholder it captured (", storage->manager().Label(storage->id()),
        "): a placeholder has no data to compute with"));
  }
  // Held for the whole loop: an eviction from the cache cannot free it meanwhile.
  absl::StatusOr<std::shared_ptr<CachedPlan>> plan = PreparePlan(loop.device, built.graph);
  if (!plan.ok()) return plan.status();

  const Device device = Device::opencl(loop.device);
  backend::BufferManager& buffers = OpenClDevice(loop.device).buffers();
  StepLoopResult result;
  std::vector<std::shared_ptr<ir::Storage>> stacked;
  for (size_t k = 0; k + num_carries < loop.outputs.size(); ++k) {
    const ir::Node& y = *loop.outputs[num_carries + k];
    std::vector<int64_t> shape = y.shape;
    shape.insert(shape.begin(), loop.steps);
    const size_t bytes = static_cast<size_t>(ir::NumElements(shape)) * dtype_size(y.dtype);
    if (k < loop.stacked_out.size() && loop.stacked_out[k] != nullptr) {
      LAZYCL_CHECK(loop.stacked_out[k]->bytes() == bytes,
                   "a declared stacked output's size differs");
      stacked.push_back(loop.stacked_out[k]);
    } else {
      stacked.push_back(std::make_shared<ir::Storage>(
          device, &buffers, bytes,
          absl::StrCat("scan ys ", k, " ", dtype_name(y.dtype), ir::ShapeString(shape))));
    }
    if (loop.steps == 0) {
      if (absl::Status s = buffers.PrepareWrite(stacked.back()->id()); !s.ok()) return s;
    }
    result.stacked.push_back(ir::MakeBuffer(stacked.back(), y.dtype, std::move(shape)));
  }

  std::vector<std::shared_ptr<ir::Storage>> carry = loop.init;
  std::vector<Binding> params(built.params.size());
  std::vector<Binding> outs(loop.outputs.size());
  for (int64_t step = 0; step < loop.steps; ++step) {
    const int64_t t = loop.reverse ? loop.steps - 1 - step : step;  // of the stacked outputs
    for (size_t p = 0; p < built.params.size(); ++p) {
      auto it = role.find(built.params[p].get());
      if (it == role.end()) {
        params[p] = {built.params[p], 0};
      } else if (it->second.first == Role::kCarry) {
        params[p] = {carry[it->second.second], 0};
      } else {
        const size_t j = it->second.second;
        params[p] = {loop.xs[j], (loop.first + t) * ir::NumElements(loop.x_in[j]->shape)};
      }
    }
    const bool last = step + 1 == loop.steps;
    for (size_t i = 0; i < num_carries; ++i) {
      if (last && i < loop.carry_out.size() && loop.carry_out[i] != nullptr) {
        LAZYCL_CHECK(loop.carry_out[i]->bytes() == carry[i]->bytes(),
                     "a declared carry's size differs");
        outs[i] = {loop.carry_out[i], 0};
        continue;
      }
      outs[i] = {std::make_shared<ir::Storage>(device, &buffers, carry[i]->bytes(),
                                               absl::StrCat("scan carry ", i)),
                 0};
    }
    for (size_t k = 0; k < stacked.size(); ++k) {
      outs[num_carries + k] = {stacked[k],
                               t * ir::NumElements(loop.outputs[num_carries + k]->shape)};
    }
    if (absl::Status s = Execute(loop.device, **plan, params, outs, built.scalars); !s.ok())
      return s;
    for (size_t i = 0; i < num_carries; ++i) carry[i] = outs[i].storage;
  }
  for (size_t i = 0; i < num_carries; ++i) {
    const ir::Node& out = *loop.outputs[i];
    result.carry.push_back(ir::MakeBuffer(carry[i], out.dtype, out.shape));
  }
  return result;
}

}  // namespace

std::vector<ir::NodePtr> DistinctOutputs(std::vector<ir::NodePtr> outputs) {
  absl::flat_hash_set<const ir::Node*> seen;
  for (ir::NodePtr& n : outputs) {
    if (n->op == ir::Op::kBuffer || seen.contains(n.get())) {
      absl::StatusOr<ir::NodePtr> view = ir::MakeReshape(n, n->shape);
      LAZYCL_CHECK(view.ok(), "a reshape to its own shape failed");
      n = *std::move(view);
    }
    seen.insert(n.get());
  }
  return outputs;
}

absl::StatusOr<StepLoopResult> RunStepLoop(const StepLoop& loop) {
  absl::StatusOr<StepLoopResult> result = RunSteps(loop);
  // The loop returns with its steps queued, so that the host builds the caller's next graph (a
  // model's head after its layers) while the device runs them; reads of the results wait. It
  // drains first where some queued launch may still make PoCL compile (Device::MayCompile: a
  // process exiting meanwhile would crash), and after a failure (kernels launched half-way).
  // Work still queued at exit is drained by the handler OpenClDevice registers.
  backend::Device& device = OpenClDevice(loop.device);
  if (!result.ok() || device.MayCompile()) {
    if (absl::Status s = device.Finish(); !s.ok() && result.ok()) return s;
  } else {
    base::metrics::Add("StepLoopsLeftQueued", 1);
  }
  return result;
}

}  // namespace lazycl::runtime
