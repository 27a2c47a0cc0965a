#pragma once

#include <memory>
#include <string>

#include "kernels/graph.h"
#include "kernels/plan.h"
#include "runtime/storage.h"

// Buffer donation: a graph's output written into the buffer of one of its own parameters, whose
// old value the caller gives up (an optimizer's p' = f(p, ...) into p's buffer), so that an
// update holds one copy of its state rather than two. The executor takes an offer only when it
// is provably safe; otherwise it allocates the output as usual (always correct).
namespace lazycl::runtime {

struct Donation {
  int output = 0;                        // index into Materialize's outputs
  std::shared_ptr<ir::Storage> storage;  // the buffer offered
  // NodePtr holders of the offered buffer's Buffer leaf outside the graph that the caller knows
  // of and gives up with it (the tensor being updated, the caller's own copy). Any other holder
  // (another tensor, a pending computation, an autograd record) means the old value is still
  // wanted, and the offer is declined.
  long known_leaf_holders = 0;
};

// Why donating `offer.storage` to output `offer.output` of `graph` is unsafe, or "" when it is
// safe: the buffer is a parameter of the graph whose leaf and storage nobody else holds; the
// output has its byte size; every node that reads the parameter, directly or through other
// nodes, is elementwise over the parameter's shape (so each work-item reads the parameter only
// at the index it writes); and no kernel after the one that writes the output reads the
// parameter. `storage_holders_in_graph` counts the shared_ptrs to the storage that the caller
// holds while building (its parameter list).
std::string DonationRefusal(const kernels::Graph& graph, const kernels::Plan& plan,
                            const Donation& offer, long storage_holders_in_graph);

}  // namespace lazycl::runtime
