// base::InlineList: the list IR nodes hold their shape and small argument in, standing where a
// std::vector stood (conversions both ways, equality with either, the same hash for equal
// lists), in place up to N elements and on the heap past them.
#include "base/inline_list.h"

#include <cstdint>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/hash/hash.h"

namespace lazycl::base {
namespace {

using List = InlineList<int64_t, 4>;

// The sizes on both sides of N: empty, in place, exactly N, and on the heap.
const std::vector<std::vector<int64_t>> kCases = {
    {}, {7}, {2, 3}, {1, 2, 3, 4}, {5, 4, 3, 2, 1}, {1, 2, 3, 4, 5, 6, 7, 8, 9}};

TEST(InlineListTest, ConvertsToAndFromVectorUnchanged) {
  for (const std::vector<int64_t>& v : kCases) {
    const List l = v;
    ASSERT_EQ(l.size(), v.size());
    for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(l[i], v[i]);
    const std::vector<int64_t> back = l;
    EXPECT_EQ(back, v);
    std::vector<int64_t> moved_from = v;
    const List m = std::move(moved_from);
    EXPECT_TRUE(m == v);
  }
}

TEST(InlineListTest, ComparesWithListsAndVectorsBothWays) {
  for (const std::vector<int64_t>& a : kCases) {
    for (const std::vector<int64_t>& b : kCases) {
      const bool same = a == b;
      EXPECT_EQ(List(a) == List(b), same);
      EXPECT_EQ(List(a) != List(b), !same);
      EXPECT_EQ(List(a) == b, same);
      EXPECT_EQ(a == List(b), same);
      EXPECT_EQ(a != List(b), !same);
    }
  }
  // A prefix is not equal.
  EXPECT_FALSE(List({1, 2}) == std::vector<int64_t>({1, 2, 3}));
}

TEST(InlineListTest, EqualListsHashAlikeAndDifferentOnesApart) {
  for (const std::vector<int64_t>& a : kCases) {
    for (const std::vector<int64_t>& b : kCases) {
      const bool same_hash = absl::HashOf(List(a)) == absl::HashOf(List(b));
      if (a == b) {
        EXPECT_TRUE(same_hash);
      } else {
        EXPECT_FALSE(same_hash) << "collision between sizes " << a.size() << " and " << b.size();
      }
    }
  }
}

TEST(InlineListTest, CopiesAndMovesKeepTheElements) {
  for (const std::vector<int64_t>& v : kCases) {
    List source = v;
    List copy = source;
    EXPECT_TRUE(copy == v);
    List moved = std::move(source);
    EXPECT_TRUE(moved == v);
    List assigned = {42};
    assigned = copy;
    EXPECT_TRUE(assigned == v);
    assigned = List(kCases.back());
    EXPECT_TRUE(assigned == kCases.back());
    assigned = std::move(moved);
    EXPECT_TRUE(assigned == v);
  }
}

TEST(InlineListTest, HoldsNonTrivialElements) {
  using Lists = InlineList<std::vector<int>, 2>;
  const std::vector<std::vector<int>> v = {{1}, {2, 3}, {}, {4, 5, 6}};
  Lists s = v;
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[3], std::vector<int>({4, 5, 6}));
  const std::vector<std::vector<int>> back = s;
  EXPECT_EQ(back, v);
  Lists moved = std::move(s);
  EXPECT_TRUE(moved == v);
}

}  // namespace
}  // namespace lazycl::base
