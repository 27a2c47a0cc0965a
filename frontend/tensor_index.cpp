// PyTorch-style indexing (lazycl/tensor.h's TensorIndex; lazycl/indexing.h's select, narrow and
// index), composed of slice, squeeze, unsqueeze, reshape and index_select: their views fuse,
// and their gradients are those ops' own.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "frontend/dispatch.h"
#include "frontend/ops_more.h"
#include "frontend/trace_scope.h"
#include "ir/shape.h"
#include "lazycl/autograd.h"
#include "lazycl/factories.h"
#include "lazycl/indexing.h"
#include "lazycl/ops.h"

namespace lazycl {
namespace {

std::string EntryText(const TensorIndex& e) {
  if (const int64_t* i = std::get_if<int64_t>(&e)) return absl::StrCat(*i);
  if (const Slice* s = std::get_if<Slice>(&e)) {
    return absl::StrCat("Slice(", s->start ? absl::StrCat(*s->start) : "none", ", ",
                        s->stop ? absl::StrCat(*s->stop) : "none", ", ", s->step, ")");
  }
  if (std::holds_alternative<Ellipsis>(e)) return "ellipsis";
  if (std::holds_alternative<NewAxis>(e)) return "newaxis";
  const Tensor& t = std::get<Tensor>(e);
  return t.defined() ? absl::StrCat("a ", dtype_name(t.dtype()), " tensor") : "an undefined tensor";
}

// Python's slice bounds for a dim of size n and step >= 1: [begin, end) clamped into [0, n].
std::pair<int64_t, int64_t> Bounds(const Slice& s, int64_t n) {
  auto bound = [n](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t b = *v < 0 ? *v + n : *v;
    return std::clamp<int64_t>(b, 0, n);
  };
  const int64_t begin = bound(s.start, 0);
  return {begin, std::max(begin, bound(s.stop, n))};
}

Tensor SliceDim(const Tensor& t, int64_t d, const Slice& s, const std::string& what) {
  if (s.step < 1) {
    base::ThrowInvalid("index",
                       absl::StrCat(what, ": the step must be >= 1 (as PyTorch's), got ", s.step));
  }
  const auto [begin, end] = Bounds(s, t.size(d));
  if (s.step == 1) return slice(t, d, begin, end);
  const int64_t count = (end - begin + s.step - 1) / s.step;
  if (count == 0) return slice(t, d, begin, begin);
  // Every step-th element from begin: a gather along d.
  const Tensor ids = arange(count, DType::i64, t.device()) * static_cast<double>(s.step) +
                     static_cast<double>(begin);
  return index_select(t, d, ids);
}

void CheckIds(const Tensor& ids, const std::string& what) {
  if (!ids.defined()) base::ThrowInvalid("index", absl::StrCat(what, " is an undefined tensor"));
  if (!is_integral(ids.dtype())) {
    base::ThrowInvalid("index", absl::StrCat(what, " is a ", dtype_name(ids.dtype()),
                                             " tensor; expected i32 or i64 ids, or a bool mask"));
  }
}

// Integer tensor entry: its elements pick along d (negative ones count from the end, as
// Python's; out-of-range ones clamp, as index_select's), its shape replacing the dim.
Tensor TakeDim(const Tensor& t, int64_t d, const Tensor& ids, const std::string& what) {
  CheckIds(ids, what);
  const std::vector<int64_t> id_shape = ids.shape();
  const Tensor flat = reshape(ids, {-1});
  const Tensor wrapped = where(lt(flat, 0.0), flat + static_cast<double>(t.size(d)), flat);
  const Tensor picked = index_select(t, d, wrapped);
  std::vector<int64_t> shape = picked.shape();
  shape.erase(shape.begin() + d);
  shape.insert(shape.begin() + d, id_shape.begin(), id_shape.end());
  return reshape(picked, shape);
}

// NumPy's rule for bool masks: a k-dim mask over dims [d, d + k) of x is the k coordinate
// tensors (i64) of its true elements, in row-major order. How many there are is the result's
// shape, so the mask is read (after its graph runs; a counted transfer from a device), which a
// traced body (trace, call, scan) cannot do.
std::vector<TensorIndex> ExpandMasks(const Tensor& x, const std::vector<TensorIndex>& indices,
                                     const char* op) {
  bool any = false;
  int64_t consumed = 0;
  for (const TensorIndex& e : indices) {
    if (const Tensor* t = std::get_if<Tensor>(&e);
        t != nullptr && t->defined() && t->dtype() == DType::boolean) {
      any = true;
      consumed += t->dim();
    } else if (!std::holds_alternative<Ellipsis>(e) && !std::holds_alternative<NewAxis>(e)) {
      ++consumed;
    }
  }
  if (!any) return indices;
  std::vector<TensorIndex> out;
  int64_t d = 0;  // x's dim the next entry applies to
  for (size_t k = 0; k < indices.size(); ++k) {
    const TensorIndex& e = indices[k];
    const Tensor* mask = std::get_if<Tensor>(&e);
    if (mask == nullptr || !mask->defined() || mask->dtype() != DType::boolean) {
      if (std::holds_alternative<Ellipsis>(e)) {
        d += std::max<int64_t>(0, x.dim() - consumed);
      } else if (!std::holds_alternative<NewAxis>(e)) {
        ++d;
      }
      out.push_back(e);
      continue;
    }
    const std::string what =
        absl::StrCat("entry ", k, " (a bool mask of shape ", ir::ShapeString(mask->shape()), ")");
    if (mask->dim() == 0) {
      base::ThrowInvalid(op, absl::StrCat(what, ": a 0-d mask is not supported (use where())"));
    }
    if (d + mask->dim() > x.dim()) {
      base::ThrowInvalid(op, absl::StrCat(what, " indexes past the last dim of x (shape ",
                                          ir::ShapeString(x.shape()), ")"));
    }
    for (int64_t i = 0; i < mask->dim(); ++i) {
      if (mask->size(i) != x.size(d + i)) {
        base::ThrowInvalid(
            op, absl::StrCat(what, " does not match x (shape ", ir::ShapeString(x.shape()),
                             ") along dim ", d + i, ": ", mask->size(i), " vs ", x.size(d + i)));
      }
    }
    if (frontend::TraceScope::active() && mask->device().is_opencl()) {
      base::ThrowInvalid(op, absl::StrCat(what,
                                          ": a mask's values decide the result's shape, so "
                                          "it is read when the op is called, which a traced "
                                          "body (trace, call, scan) cannot do; use where()"));
    }
    const std::vector<uint8_t> bits = mask->to_vector<uint8_t>();
    const std::vector<int64_t> mshape = mask->shape();
    std::vector<std::vector<int64_t>> coords(mshape.size());
    for (size_t flat = 0; flat < bits.size(); ++flat) {
      if (bits[flat] == 0) continue;
      size_t rest = flat;
      for (size_t i = mshape.size(); i-- > 0;) {
        const auto n = static_cast<size_t>(mshape[i]);
        coords[i].push_back(static_cast<int64_t>(rest % n));
        rest /= n;
      }
    }
    for (std::vector<int64_t>& c : coords) {
      const auto count = static_cast<int64_t>(c.size());
      out.push_back(tensor(std::move(c), {count}, x.device()));
    }
    d += mask->dim();
  }
  return out;
}

// Applies `indices` to x in order: slices, ellipsis and newaxis here; an integer (checked in
// range) through on_int(t, d, i) and a tensor through on_tensor(t, d, ids, what), each
// returning the new t and advancing d, the dim of t the next entry applies to, past what it
// left. `consumed` is how many of x's dims the entries index.
using OnInt = std::function<Tensor(const Tensor& t, int64_t& d, int64_t i)>;
using OnTensor =
    std::function<Tensor(const Tensor& t, int64_t& d, const Tensor& ids, const std::string& what)>;
Tensor ApplyEntries(const Tensor& x, const std::vector<TensorIndex>& indices, int64_t consumed,
                    const OnInt& on_int, const OnTensor& on_tensor) {
  Tensor t = x;
  int64_t d = 0;
  for (size_t k = 0; k < indices.size(); ++k) {
    const TensorIndex& e = indices[k];
    const std::string what = absl::StrCat("entry ", k, " (", EntryText(e), ")");
    if (const int64_t* i = std::get_if<int64_t>(&e)) {
      const int64_t n = t.size(d);
      if (*i < -n || *i >= n) {
        base::ThrowInvalid("index", absl::StrCat(what, " is out of range for a dim of size ", n,
                                                 " (shape ", ir::ShapeString(x.shape()), ")"));
      }
      t = on_int(t, d, *i);
    } else if (const Slice* s = std::get_if<Slice>(&e)) {
      t = SliceDim(t, d, *s, what);
      ++d;
    } else if (std::holds_alternative<Ellipsis>(e)) {
      d += x.dim() - consumed;
    } else if (std::holds_alternative<NewAxis>(e)) {
      t = unsqueeze(t, d);
      ++d;
    } else {
      t = on_tensor(t, d, std::get<Tensor>(e), what);
    }
  }
  return t;
}

// x indexed by several advanced entries (integer tensors and integers) at once: NumPy's rule.
// They broadcast together to a shape S; element s of the result's S part reads x at
// (ids_1[s], ..., ids_m[s]) along the advanced dims (negative ids counted from the end, others
// out of range clamped, as TakeDim). S goes where the first advanced entry was when they are side
// by side in the list, else first.
Tensor IndexAdvanced(const Tensor& x, const std::vector<TensorIndex>& indices, int64_t consumed,
                     bool to_front) {
  std::vector<std::pair<int64_t, Tensor>> advanced;  // (dim of t, ids)
  const Tensor t = ApplyEntries(
      x, indices, consumed,
      [&](const Tensor& t, int64_t& d, int64_t i) {
        advanced.emplace_back(d++, full({}, static_cast<double>(i), DType::i64, x.device()));
        return t;
      },
      [&](const Tensor& t, int64_t& d, const Tensor& ids, const std::string& what) {
        CheckIds(ids, what);
        advanced.emplace_back(d++, ids);
        return t;
      });
  std::vector<ir::Shape> shapes;
  for (const auto& [dim, ids] : advanced) shapes.push_back(ids.shape());
  std::vector<const ir::Shape*> shape_ptrs;
  for (const ir::Shape& shape : shapes) shape_ptrs.push_back(&shape);
  const ir::Shape common = frontend::BroadcastShapes(shape_ptrs, "index");
  // One flat id into the advanced dims (row-major), each id wrapped and clamped first.
  Tensor flat;
  int64_t extent = 1;
  for (size_t a = advanced.size(); a-- > 0;) {
    const int64_t n = t.size(advanced[a].first);
    const Tensor ids = cast(advanced[a].second, DType::i64);
    const Tensor wrapped = where(lt(ids, 0.0), ids + static_cast<double>(n), ids);
    const Tensor id = clamp(wrapped, 0, static_cast<double>(std::max<int64_t>(n - 1, 0)));
    const Tensor term = broadcast_to(id * static_cast<double>(extent), common);
    flat = flat.defined() ? flat + term : term;
    extent *= n;
  }
  // The advanced dims first, merged into one, gathered, then split into S.
  std::vector<int64_t> perm, rest_shape;
  for (const auto& [dim, ids] : advanced) perm.push_back(dim);
  for (int64_t i = 0; i < t.dim(); ++i) {
    if (std::find(perm.begin(), perm.end(), i) == perm.end()) {
      perm.push_back(i);
      rest_shape.push_back(t.size(i));
    }
  }
  std::vector<int64_t> merged = {extent};
  merged.insert(merged.end(), rest_shape.begin(), rest_shape.end());
  const Tensor picked = index_select(reshape(permute(t, perm), merged), 0, reshape(flat, {-1}));
  std::vector<int64_t> shape(common.begin(), common.end());
  shape.insert(shape.end(), rest_shape.begin(), rest_shape.end());
  Tensor result = reshape(picked, shape);
  const int64_t at = advanced.front().first;  // dims of t before it are all basic
  if (to_front || at == 0) return result;
  const auto s_rank = static_cast<int64_t>(common.size());
  std::vector<int64_t> order;
  for (int64_t i = 0; i < at; ++i) order.push_back(s_rank + i);
  for (int64_t i = 0; i < s_rank; ++i) order.push_back(i);
  for (int64_t i = s_rank + at; i < result.dim(); ++i) order.push_back(i);
  return permute(result, order);
}
}  // namespace

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  frontend::ImplOf(x, "select");
  if (x.dim() == 0) base::ThrowInvalid("select", "cannot select from a rank-0 tensor");
  const int64_t d = frontend::NormalizeDim(dim, x.dim(), "select");
  const int64_t n = x.size(d);
  if (index < -n || index >= n) {
    base::ThrowInvalid(
        "select",
        absl::StrCat("index ", index, " is out of range for dim ", d, " of size ", n, " (shape ",
                     ir::ShapeString(x.shape()), "); expected ", -n, " <= index < ", n));
  }
  const int64_t i = index < 0 ? index + n : index;
  return squeeze(slice(x, d, i, i + 1), d);
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  frontend::ImplOf(x, "narrow");
  if (x.dim() == 0) base::ThrowInvalid("narrow", "cannot narrow a rank-0 tensor");
  const int64_t d = frontend::NormalizeDim(dim, x.dim(), "narrow");
  const int64_t n = x.size(d);
  const int64_t begin = start < 0 ? start + n : start;
  if (begin < 0 || begin > n || length < 0 || length > n - begin) {
    base::ThrowInvalid(
        "narrow",
        absl::StrCat("start ", start, " and length ", length, " do not fit in dim ", d, " of size ",
                     n, " (shape ", ir::ShapeString(x.shape()), "): expected -", n,
                     " <= start <= ", n, " and 0 <= length <= size - start"));
  }
  return slice(x, d, begin, begin + length);
}

Tensor index(const Tensor& x, const std::vector<TensorIndex>& entries) {
  frontend::ImplOf(x, "index");
  const std::vector<TensorIndex> indices = ExpandMasks(x, entries, "index");
  int64_t consumed = 0, ellipses = 0, tensors = 0;
  for (const TensorIndex& e : indices) {
    if (std::holds_alternative<Ellipsis>(e)) {
      ++ellipses;
    } else if (!std::holds_alternative<NewAxis>(e)) {
      ++consumed;
      tensors += std::holds_alternative<Tensor>(e);
    }
  }
  if (ellipses > 1) base::ThrowInvalid("index", "at most one ellipsis may appear");
  if (consumed > x.dim()) {
    base::ThrowInvalid("index", absl::StrCat(consumed, " indices for a tensor of rank ", x.dim(),
                                             " (shape ", ir::ShapeString(x.shape()), ")"));
  }
  // NumPy's (and PyTorch's) rule: integers count as advanced indices with the tensor entry;
  // when these are not side by side in the list, the tensor's dims go first in the result.
  int64_t first = -1, last = -1, advanced = 0;
  for (size_t k = 0; k < indices.size(); ++k) {
    if (std::holds_alternative<int64_t>(indices[k]) || std::holds_alternative<Tensor>(indices[k])) {
      if (first < 0) first = static_cast<int64_t>(k);
      last = static_cast<int64_t>(k);
      ++advanced;
    }
  }
  const bool to_front = last - first + 1 != advanced;
  if (tensors > 1) return IndexAdvanced(x, indices, consumed, to_front);
  int64_t block = 0, block_rank = 0;  // where the tensor entry's dims are in `t`
  Tensor t = ApplyEntries(
      x, indices, consumed, [](const Tensor& t, int64_t& d, int64_t i) { return select(t, d, i); },
      [&](const Tensor& t, int64_t& d, const Tensor& ids, const std::string& what) {
        block = d;
        block_rank = ids.defined() ? ids.dim() : 0;
        const Tensor taken = TakeDim(t, d, ids, what);
        d += block_rank;
        return taken;
      });
  if (tensors == 1 && to_front && block > 0) {
    std::vector<int64_t> perm;
    for (int64_t i = 0; i < block_rank; ++i) perm.push_back(block + i);
    for (int64_t i = 0; i < t.dim(); ++i) {
      if (i < block || i >= block + block_rank) perm.push_back(i);
    }
    t = permute(t, perm);
  }
  return t;
}

namespace {

// Whether `from` broadcasts to `to` (NumPy's rule, one way: to's shape is the result).
bool BroadcastsTo(const std::vector<int64_t>& from, const std::vector<int64_t>& to) {
  if (from.size() > to.size()) return false;
  for (size_t k = 1; k <= from.size(); ++k) {
    const int64_t f = from[from.size() - k];
    if (f != 1 && f != to[to.size() - k]) return false;
  }
  return true;
}

// index_put when the only entry is a bool mask and one value goes everywhere it is true: a
// where(), with nothing read (so it also works inside a traced body).
bool IsMaskFill(const Tensor& x, const std::vector<TensorIndex>& indices, const Tensor& values) {
  if (indices.size() != 1 || values.numel() != 1) return false;
  const Tensor* mask = std::get_if<Tensor>(&indices[0]);
  if (mask == nullptr || !mask->defined() || mask->dtype() != DType::boolean) return false;
  if (mask->dim() == 0 || mask->dim() > x.dim()) return false;
  for (int64_t i = 0; i < mask->dim(); ++i) {
    if (mask->size(i) != x.size(i)) return false;
  }
  return true;
}

}  // namespace

Tensor index_put(const Tensor& x, const std::vector<TensorIndex>& entries, const Tensor& values,
                 bool accumulate) {
  frontend::ImplOf(x, "index_put");
  frontend::ImplOf(values, "index_put");
  if (values.dtype() != x.dtype()) {
    base::ThrowInvalid("index_put",
                       absl::StrCat("values are ", dtype_name(values.dtype()), " but x is ",
                                    dtype_name(x.dtype()), "; cast them first (as PyTorch asks)"));
  }
  if (accumulate && x.dtype() == DType::boolean) {
    base::ThrowInvalid("index_put", "accumulate needs a numeric dtype, not bool");
  }
  if (IsMaskFill(x, entries, values)) {
    const Tensor& mask = std::get<Tensor>(entries[0]);
    std::vector<int64_t> shape = mask.shape();
    shape.resize(static_cast<size_t>(x.dim()), 1);
    const Tensor where_true = reshape(mask, shape);
    const Tensor v = reshape(values, {});
    if (!accumulate) return where(where_true, v, x);
    return x + where(where_true, v, zeros({}, x.dtype(), x.device()));
  }
  const std::vector<TensorIndex> indices = ExpandMasks(x, entries, "index_put");
  // The selected elements' flat offsets in x: index() of an iota of x's shape. Each dim a tensor
  // entry indexes gets one more slot, holding -1, where an id out of range points, so that
  // scatter_add drops its update (JAX's default for updates).
  int64_t consumed = 0;
  for (const TensorIndex& e : indices) {
    if (!std::holds_alternative<Ellipsis>(e) && !std::holds_alternative<NewAxis>(e)) ++consumed;
  }
  Tensor positions = reshape(arange(x.numel(), DType::i64, x.device()), x.shape());
  std::vector<TensorIndex> at;
  int64_t d = 0;  // x's dim the next entry applies to
  for (size_t k = 0; k < indices.size(); ++k) {
    const TensorIndex& e = indices[k];
    if (std::holds_alternative<Ellipsis>(e)) {
      d += std::max<int64_t>(0, x.dim() - consumed);
    } else if (const Tensor* ids = std::get_if<Tensor>(&e); ids != nullptr && d < x.dim()) {
      CheckIds(*ids, absl::StrCat("entry ", k, " (", EntryText(e), ")"));
      const double n = static_cast<double>(x.size(d));
      const Tensor id = cast(*ids, DType::i64);
      const Tensor inside = where(ge(id, -n), lt(id, n), full({}, 0, DType::boolean, x.device()));
      at.emplace_back(
          where(inside, where(lt(id, 0.0), id + n, id), full({}, n, DType::i64, x.device())));
      std::vector<int64_t> slot = positions.shape();
      slot[static_cast<size_t>(d)] = 1;
      positions = cat({positions, full(slot, -1, DType::i64, x.device())}, d);
      ++d;
      continue;
    } else if (!std::holds_alternative<NewAxis>(e)) {
      ++d;
    }
    at.push_back(e);
  }
  const Tensor selected = index(positions, at);
  const std::vector<int64_t> vs = values.shape(), ss = selected.shape();
  if (!BroadcastsTo(vs, ss)) {
    base::ThrowInvalid(
        "index_put", absl::StrCat("values of shape ", ir::ShapeString(vs),
                                  " do not broadcast to the selected shape ", ir::ShapeString(ss)));
  }
  const Tensor spread = broadcast_to(values, ss);
  const Tensor where_to = reshape(selected, {-1});
  const Tensor flat_x = reshape(x, {-1});
  const bool boolean = x.dtype() == DType::boolean;
  const DType math = boolean ? DType::i32 : x.dtype();
  const Tensor flat_v = cast(reshape(spread, {-1}), math);
  if (accumulate) return reshape(scatter_add(flat_x, 0, where_to, flat_v), x.shape());
  const Tensor hits = scatter_add(zeros({x.numel()}, DType::i32, x.device()), 0, where_to,
                                  ones({where_to.numel()}, DType::i32, x.device()));
  Tensor put = scatter_add(zeros({x.numel()}, math, x.device()), 0, where_to, flat_v);
  if (boolean) put = ne(put, 0.0);
  return reshape(where(gt(hits, 0.0), put, flat_x), x.shape());
}

Tensor index_put(const Tensor& x, const std::vector<TensorIndex>& indices, double value,
                 bool accumulate) {
  frontend::ImplOf(x, "index_put");
  return index_put(x, indices, full({}, value, x.dtype(), x.device()), accumulate);
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  frontend::ImplOf(x, "masked_fill");
  frontend::ImplOf(mask, "masked_fill");
  if (mask.dtype() != DType::boolean) {
    base::ThrowInvalid("masked_fill", absl::StrCat("the mask is ", dtype_name(mask.dtype()),
                                                   "; expected a bool tensor"));
  }
  const std::vector<int64_t> xs = x.shape(), ms = mask.shape();
  if (!BroadcastsTo(ms, xs)) {
    base::ThrowInvalid("masked_fill",
                       absl::StrCat("the mask's shape ", ir::ShapeString(ms),
                                    " does not broadcast to x's ", ir::ShapeString(xs)));
  }
  return where(mask, full({}, value, x.dtype(), x.device()), x);
}

namespace {

// An in-place assignment records no gradient: where x would need one, it is an Error (PyTorch
// records it; we say what to write instead).
void CheckInPlace(const Tensor& x, const char* op, const char* functional) {
  if (x.requires_grad() && is_grad_enabled()) {
    base::ThrowInvalid(op, absl::StrCat(x.str(), " requires grad, and an in-place ", op,
                                        " records no gradient: write x = ", functional,
                                        "(x, ...) instead (or assign under a NoGradGuard)"));
  }
}

}  // namespace

Tensor& Tensor::index_put_(std::initializer_list<TensorIndex> indices, const Tensor& values,
                           bool accumulate) {
  frontend::ImplOf(*this, "index_put_");
  CheckInPlace(*this, "index_put_", "index_put");
  return copy_(lazycl::index_put(*this, std::vector<TensorIndex>(indices), values, accumulate));
}

Tensor& Tensor::index_put_(std::initializer_list<TensorIndex> indices, double value,
                           bool accumulate) {
  frontend::ImplOf(*this, "index_put_");
  CheckInPlace(*this, "index_put_", "index_put");
  return copy_(lazycl::index_put(*this, std::vector<TensorIndex>(indices), value, accumulate));
}

Tensor& Tensor::masked_fill_(const Tensor& mask, double value) {
  frontend::ImplOf(*this, "masked_fill_");
  CheckInPlace(*this, "masked_fill_", "masked_fill");
  return copy_(lazycl::masked_fill(*this, mask, value));
}

Tensor Tensor::operator[](int64_t i) const { return select(*this, 0, i); }

Tensor Tensor::index(std::initializer_list<TensorIndex> indices) const {
  return lazycl::index(*this, std::vector<TensorIndex>(indices));
}

}  // namespace lazycl
