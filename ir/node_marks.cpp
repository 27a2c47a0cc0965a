#include "ir/node_marks.h"

#include <atomic>
#include <cstdlib>

#include "base/check.h"
#include "base/metrics_registry.h"

namespace lazycl::ir {
namespace {

std::atomic<int> holders{0};  // walks that asked for the marks and have not given them back
std::atomic<uint64_t> last_id{0};

}  // namespace

NodeMarks::NodeMarks() {
  // Only a walk that finds no other holding or asking takes them: while it holds them the count
  // stays above 0, so no other walk can.
  held_ = holders.fetch_add(1, std::memory_order_acq_rel) == 0;
  if (held_) {
    id_ = last_id.fetch_add(1, std::memory_order_relaxed) + 1;
  } else {
    base::metrics::Add("NodeMarksBusy", 1);
  }
}

NodeMarks::~NodeMarks() { holders.fetch_sub(1, std::memory_order_acq_rel); }

NodePositions::NodePositions(std::span<const Node* const> order) {
  if (marks_.held()) {
    for (size_t i = 0; i < order.size(); ++i)
      order[i]->memo.SetPosition(marks_.id(), static_cast<int64_t>(i));
    return;
  }
  map_.reserve(order.size());
  for (size_t i = 0; i < order.size(); ++i) map_.emplace(order[i], static_cast<int>(i));
}

void NodePositions::NotInOrder(const Node& node) {
  LAZYCL_CHECK(false, "NodePositions: %s is not in the order", NodeString(node).c_str());
  std::abort();
}

}  // namespace lazycl::ir
