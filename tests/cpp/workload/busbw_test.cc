// The busbw factors (workload/collective.h), the one copy of the rule that the worker, the
// runner's metrics and the benchmarks use.
#include <gtest/gtest.h>

#include "workload/collective.h"

namespace faultline::workload {
namespace {

TEST(BusBwFactor, FollowsNcclTests) {
  EXPECT_DOUBLE_EQ(BusBwFactor(Coll::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(BusBwFactor(Coll::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBwFactor(Coll::kReduceScatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(BusBwFactor(Coll::kAllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(BusBwFactor(Coll::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(BusBwFactor(Coll::kAllReduce, 1), 0.0);  // one rank moves nothing
}

TEST(BusBwFactor, NoRanksIsZeroNotInfinite) {
  for (Coll c : {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter, Coll::kBroadcast,
                 Coll::kAllToAll}) {
    EXPECT_EQ(BusBwFactor(c, 0), 0.0) << CollName(c);
    EXPECT_EQ(BusBwFactor(c, -1), 0.0) << CollName(c);
  }
}

TEST(BusBwFactorOf, SameAsTheEnumForEveryCollectiveByItsName) {
  for (Coll c : {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter, Coll::kBroadcast,
                 Coll::kAllToAll}) {
    for (int ranks : {1, 2, 3, 8}) {
      const auto f = BusBwFactorOf(CollName(c), ranks);
      ASSERT_TRUE(f.has_value()) << CollName(c);
      EXPECT_DOUBLE_EQ(*f, BusBwFactor(c, ranks)) << CollName(c) << " " << ranks;
    }
  }
}

TEST(BusBwFactorOf, ReduceAndBarrierWhichCollHasNot) {
  EXPECT_EQ(BusBwFactorOf("reduce", 4), 1.0);
  EXPECT_EQ(BusBwFactorOf("barrier", 4), 0.0);
  EXPECT_EQ(BusBwFactorOf("reduce", 0), 0.0);
  EXPECT_FALSE(BusBwFactorOf("sendrecv", 4).has_value());
  EXPECT_FALSE(BusBwFactorOf("float", 4).has_value());
  EXPECT_FALSE(BusBwFactorOf("", 4).has_value());
}

}  // namespace
}  // namespace faultline::workload
