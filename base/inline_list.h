#pragma once

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"

// A list that holds up to N elements in place (absl::InlinedVector) and converts to and from
// std::vector<T> implicitly, so that it can stand where a std::vector stood: the fields of IR
// nodes (the shape and the small argument; the operands are an absl::InlinedVector with no
// conversions, ir::Operands), which are made and dropped by the hundred per step of a loop. Each
// conversion copies; the lists themselves allocate only past N.
namespace lazycl::base {

template <typename T, size_t N>
class InlineList : public absl::InlinedVector<T, N> {
 public:
  using Base = absl::InlinedVector<T, N>;
  using Base::Base;
  InlineList() requires(!std::is_trivially_copyable_v<T>) = default;
  // Zeroes the storage first: absl moves and copies a list of trivially copyable elements by
  // copying the whole storage, which GCC 12 reports as a read of uninitialized memory
  // (-Wuninitialized) where fewer than N were ever set.
  InlineList() requires std::is_trivially_copyable_v<T> : Base(N, T()) { this->clear(); }
  InlineList(const std::vector<T>& v) : Base(v.begin(), v.end()) {}  // NOLINT: implicit
  InlineList(std::vector<T>&& v)                                     // NOLINT: implicit
      : Base(std::make_move_iterator(v.begin()), std::make_move_iterator(v.end())) {}
  operator std::vector<T>() const { return std::vector<T>(this->begin(), this->end()); }  // NOLINT

  friend bool operator==(const InlineList& a, const InlineList& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const InlineList& a, const std::vector<T>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  template <typename H>
  friend H AbslHashValue(H h, const InlineList& l) {
    return H::combine(std::move(h), static_cast<const Base&>(l));
  }
};

}  // namespace lazycl::base
