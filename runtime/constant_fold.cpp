#include "runtime/constant_fold.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <list>
#include <mutex>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"
#include "base/metrics_registry.h"
#include "base/settings.h"
#include "ir/op_table.h"
#include "ir/post_order.h"
#include "ir/shape.h"
#include "runtime/storage.h"

namespace lazycl::runtime {

using ir::Node;
using ir::Op;

namespace {

constexpr int64_t kMaxFoldedElements = int64_t{1} << 20;

// The exact structure of the subexpression under `root` (every node reads only iota, constants
// and scalars): per node in post order its op, dtype, shape, args, value (a Scalar's only with
// `scalar_values`) and operands by position.
// Written into `key` (cleared first, its capacity kept): a key of a few hundred nodes is kilobytes,
// and building it in a fresh string each time took most of a fold's host time in glibc's
// malloc (its growth to a large chunk consolidates the free lists).
void ExactKey(int device, const Node& root, bool scalar_values, std::string& key) {
  key.clear();
  auto put = [&key](uint64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  put(static_cast<uint64_t>(device));
  const Node* roots[] = {&root};
  const std::vector<const Node*> order = ir::PostOrder(roots);
  absl::flat_hash_map<const Node*, uint64_t> position;
  for (const Node* n : order) {
    position[n] = position.size();
    put(static_cast<uint64_t>(n->op));
    put(static_cast<uint64_t>(n->dtype));
    put(n->shape.size());
    for (int64_t d : n->shape) put(static_cast<uint64_t>(d));
    put(n->args.size());
    for (int64_t a : n->args) put(static_cast<uint64_t>(a));
    uint64_t bits = 0;
    if (n->op != Op::kScalar || scalar_values) std::memcpy(&bits, &n->value, sizeof(bits));
    put(bits);
    put(n->operands.size());
    for (const ir::NodePtr& o : n->operands) put(position.at(o.get()));
  }
}

// The folded values of every device, least recently used last; bounded in bytes.
class ConstantCache {
 public:
  std::shared_ptr<ir::Storage> Find(absl::string_view key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_key_.find(key);
    if (it == by_key_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->second;
  }

  void Insert(const std::string& key, std::shared_ptr<ir::Storage> storage, int64_t limit) {
    std::lock_guard<std::mutex> lock(mu_);
    if (by_key_.contains(key)) return;  // another thread computed it first
    bytes_ += static_cast<int64_t>(storage->bytes());
    order_.emplace_front(key, std::move(storage));
    by_key_[key] = order_.begin();
    while (bytes_ > limit && !order_.empty()) {
      bytes_ -= static_cast<int64_t>(order_.back().second->bytes());
      by_key_.erase(order_.back().first);
      order_.pop_back();
    }
  }

  // Whether the subexpression of structure `shape` (its key without scalar values) is still worth
  // folding for these values: one whose scalars took kMaxValues values (a schedule's step
  // count, say) is left to its kernels from then on, rather than folded anew for every value.
  bool Worth(absl::string_view shape, const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    if (values_.size() > kMaxShapes) values_.clear();
    std::vector<std::string>& seen = values_[std::string(shape)];
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) return true;
    if (seen.size() >= kMaxValues) return false;
    seen.push_back(key);
    return true;
  }

  // Graphs (by their outputs' structural hashes) found to hold nothing to fold, so that the
  // walk is not repeated each time they run. A collision only skips folding, never changes a
  // value.
  bool NothingToFold(uint64_t graph) {
    std::lock_guard<std::mutex> lock(mu_);
    return nothing_.contains(graph);
  }
  void SetNothingToFold(uint64_t graph) {
    std::lock_guard<std::mutex> lock(mu_);
    if (nothing_.size() > kMaxGraphs) nothing_.clear();
    nothing_.insert(graph);
  }

  int64_t bytes() {
    std::lock_guard<std::mutex> lock(mu_);
    return bytes_;
  }

  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    values_.clear();
    nothing_.clear();
    by_key_.clear();
    order_.clear();
    bytes_ = 0;
  }

 private:
  using Entry = std::pair<std::string, std::shared_ptr<ir::Storage>>;
  std::mutex mu_;
  std::list<Entry> order_;  // most recently used first
  absl::flat_hash_map<std::string, std::list<Entry>::iterator> by_key_;
  int64_t bytes_ = 0;
  static constexpr size_t kMaxValues = 4, kMaxShapes = 4096, kMaxGraphs = 1 << 16;
  absl::flat_hash_set<uint64_t> nothing_;
  absl::flat_hash_map<std::string, std::vector<std::string>> values_;
};

ConstantCache& Cache() {
  static auto* cache = new ConstantCache();  // never destroyed, like the executor's caches
  return *cache;
}

// The tables FoldOperands folded last, found by node rather than by structure: every layer reads
// the same table through a tensor of its own (a cast to its dtype, a view), so the same node
// comes back a few times a graph, and ExactKey's walk of it was most of a fold (a `for`-loop
// sampling token folded its two tables eight times). An entry holds a node over the table, so
// the pointer is never another node's, and its value only weakly: what the cache evicted is
// found by structure again.
class RecentFolds {
 public:
  std::shared_ptr<ir::Storage> Find(int device, const Node* table) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Entry& e : entries_) {
      if (e.table == table && e.device == device) return e.value.lock();
    }
    return nullptr;
  }

  // `holder` reads `table` through views (or is it).
  void Put(int device, ir::NodePtr holder, const Node* table,
           const std::shared_ptr<ir::Storage>& value) {
    std::lock_guard<std::mutex> lock(mu_);
    entries_[next_] = Entry{std::move(holder), table, device, value};
    next_ = (next_ + 1) % entries_.size();
  }

  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    entries_ = {};
  }

 private:
  struct Entry {
    ir::NodePtr holder;
    const Node* table = nullptr;
    int device = -1;
    std::weak_ptr<ir::Storage> value;
  };
  std::mutex mu_;
  std::array<Entry, 8> entries_;
  size_t next_ = 0;
};

RecentFolds& Recent() {
  static auto* recent = new RecentFolds();
  return *recent;
}

// The node under `n`'s views where that is worth folding: it reads no data, holds a
// transcendental, is not a leaf and has at most kMaxFoldedElements elements (a table expanded
// over a batch is folded at its own size); nullptr otherwise.
const Node* FoldRoot(const Node* n) {
  while (ir::IsView(n->op)) n = n->operands[0].get();
  const int64_t elements = ir::NumElements(n->shape);
  return n->holds_transcendental && !ir::IsLeaf(n->op) && elements > 0 &&
                 elements <= kMaxFoldedElements
             ? n
             : nullptr;
}

// The folded value of `c` (a FoldRoot): the cached one, else computed with `compute` and cached;
// nullptr where its scalars keep changing (ConstantCache::Worth) or it cannot be computed on its
// own (no room for one more buffer, say: folding is an optimisation, and the graph that reads it
// reports its own error if it has one).
std::shared_ptr<ir::Storage> FoldOne(int device, const Node& c, const ComputeNode& compute,
                                     int64_t limit) {
  // Reused by each thread's folds; copied before `compute`, which may fold (and key) again.
  thread_local std::string exact, structure;
  ExactKey(device, c, /*scalar_values=*/true, exact);
  std::shared_ptr<ir::Storage> storage = Cache().Find(exact);
  if (storage != nullptr) {
    base::metrics::Add("FoldedConstantReads", 1);
    return storage;
  }
  const std::string key = exact;
  ExactKey(device, c, /*scalar_values=*/false, structure);
  if (!Cache().Worth(structure, key)) return nullptr;
  absl::StatusOr<std::shared_ptr<ir::Storage>> computed = compute(c);
  if (!computed.ok()) return nullptr;
  storage = *std::move(computed);
  Cache().Insert(key, storage, limit);
  base::metrics::Add("ConstantsFolded", 1);
  return storage;
}

}  // namespace

absl::StatusOr<Folded> FoldConstants(int device, const std::vector<const Node*>& outputs,
                                     const ComputeNode& compute) {
  Folded folded;
  const int64_t limit = base::CurrentSettings().constant_cache_bytes;
  if (limit <= 0) return folded;
  uint64_t graph = absl::HashOf(device);
  for (const Node* out : outputs) graph = absl::HashOf(graph, out->hash);
  if (Cache().NothingToFold(graph)) return folded;
  const std::vector<const Node*> order = ir::PostOrder(outputs);
  const bool any = std::any_of(order.begin(), order.end(),
                               [](const Node* n) { return n->holds_transcendental; });
  if (!any) {
    Cache().SetNothingToFold(graph);
    return folded;
  }
  // The largest subexpressions that read no data: read by a node that does (or an output).
  std::vector<const Node*> candidates;
  absl::flat_hash_set<const Node*> seen;
  auto add = [&](const Node* n) {
    if (n != nullptr && seen.insert(n).second) candidates.push_back(n);
  };
  for (const Node* n : order) {
    if (n->reads_no_data) continue;
    for (const ir::NodePtr& o : n->operands) {
      if (o->reads_no_data) add(FoldRoot(o.get()));
    }
  }
  // An output that qualifies is returned as the folded value itself; one that is a view of a
  // folded value still gets its own buffer, computed (a copy) from the folded one.
  for (const Node* out : outputs) {
    if (out->reads_no_data) add(FoldRoot(out));
  }
  if (candidates.empty()) {
    Cache().SetNothingToFold(graph);
    return folded;
  }

  absl::flat_hash_map<const Node*, ir::NodePtr> replace;
  absl::flat_hash_map<const Node*, std::shared_ptr<ir::Storage>> storage_of;
  for (const Node* c : candidates) {
    std::shared_ptr<ir::Storage> storage = FoldOne(device, *c, compute, limit);
    if (storage == nullptr) continue;
    replace[c] = ir::MakeBuffer(storage, c->dtype, c->shape);
    storage_of[c] = std::move(storage);
  }
  // Every candidate's scalars keep changing, or none could be computed on its own: this
  // graph is run as it is from now on.
  if (replace.empty()) {
    Cache().SetNothingToFold(graph);
    return folded;
  }
  folded.changed = true;
  std::vector<ir::NodePtr> copies;
  std::vector<size_t> copied;
  folded.roots.resize(outputs.size());
  folded.ready.resize(outputs.size());
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (auto it = storage_of.find(outputs[k]); it != storage_of.end()) {
      folded.ready[k] = it->second;
      continue;
    }
    // A copy of the output node shares its operands, which Substitute rebuilds (made as every
    // node is, so that it counts among the live pending nodes: ir::LivePendingNodes).
    copies.push_back(ir::FinishNode(*outputs[k]));
    copied.push_back(k);
  }
  std::vector<ir::NodePtr> rebuilt = ir::Substitute(copies, replace);
  for (size_t i = 0; i < copied.size(); ++i) folded.roots[copied[i]] = std::move(rebuilt[i]);
  return folded;
}

FoldedOperands FoldOperands(int device, const ir::NodePtr& node, const ComputeNode& compute) {
  FoldedOperands out;
  if (node->reads_no_data) return out;
  const int64_t limit = base::CurrentSettings().constant_cache_bytes;
  if (limit <= 0) return out;
  for (const ir::NodePtr& o : node->operands) {
    if (!o->holds_transcendental) continue;
    const Node* root = FoldRoot(o.get());
    if (root == nullptr || out.leaves.contains(root)) continue;
    std::shared_ptr<ir::Storage> storage = Recent().Find(device, root);
    if (storage != nullptr) {
      base::metrics::Add("FoldedConstantReads", 1);
      base::metrics::Add("FoldedConstantReadsByNode", 1);
    } else {
      storage = FoldOne(device, *root, compute, limit);
      if (storage != nullptr) Recent().Put(device, o, root, storage);
    }
    if (storage != nullptr)
      out.leaves[root] = ir::MakeBuffer(std::move(storage), root->dtype, root->shape);
  }
  if (out.leaves.empty()) return out;
  out.node = ir::WithOperands(*node, [&](const ir::NodePtr& o) {
    ir::NodePtr over = OverFolded(o, out);
    return over != nullptr ? over : o;
  });
  return out;
}

ir::NodePtr OverFolded(const ir::NodePtr& n, const FoldedOperands& folded) {
  if (!n->holds_transcendental) return nullptr;
  const Node* root = n.get();
  while (ir::IsView(root->op)) root = root->operands[0].get();
  auto it = folded.leaves.find(root);
  if (it == folded.leaves.end()) return nullptr;
  // The views are rebuilt over the leaf: a few nodes (a table's reshape and expand).
  return root == n.get() ? it->second : ir::Substitute({n}, {{root, it->second}})[0];
}

int64_t ConstantCacheBytes() { return Cache().bytes(); }

void ClearConstantCache() {
  Cache().Clear();
  Recent().Clear();
}

}  // namespace lazycl::runtime
