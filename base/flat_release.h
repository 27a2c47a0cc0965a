#pragma once

#include <iterator>
#include <utility>

#include "absl/container/inlined_vector.h"

// Releasing a long chain of objects that own their successors by shared_ptr (IR nodes and their
// operands, autograd records and their inputs) without recursing one destructor per link, which
// overflows small stacks on a chain of a million.
namespace lazycl::base {

// Called by the destructor of an object of type T with the handles it owns. The outermost call
// on a thread drops the handles one by one; a destructor of another T that this runs on the
// same thread only hands its own handles over to that loop. Unlike peeking at use_count() (a
// relaxed read, so nothing orders it after another thread's last use), every object is
// destroyed by its shared_ptr's own release, as usual.
template <typename T, typename Handles>
void ReleaseFlat(Handles& handles) {
  using Handle = typename Handles::value_type;
  // The loop's list, in place up to 16: a node dropped with a few operands allocates nothing.
  using List = absl::InlinedVector<Handle, 16>;
  if (handles.empty()) return;  // a leaf: no need to find this thread's loop
  thread_local List* pending = nullptr;
  if (pending != nullptr) {
    for (Handle& h : handles) pending->push_back(std::move(h));
    handles.clear();
    return;
  }
  List doomed(std::make_move_iterator(handles.begin()), std::make_move_iterator(handles.end()));
  handles.clear();
  pending = &doomed;
  while (!doomed.empty()) {
    Handle h = std::move(doomed.back());
    doomed.pop_back();
    h.reset();  // may run T's destructor, which appends to `doomed`
  }
  pending = nullptr;
}

}  // namespace lazycl::base
