#include <gtest/gtest.h>

#include "algo/algo.h"

namespace ftccl::algo {
namespace {

TEST(PartitionTest, BlocksCoverTheBufferExactlyOnce) {
  for (size_t count : {0ul, 1ul, 7ul, 8ul, 1000003ul}) {
    for (int n : {1, 2, 3, 4, 8}) {
      size_t next = 0;
      for (int b = 0; b < n; ++b) {
        Range r = Block(count, n, b);
        EXPECT_EQ(r.off, next);
        EXPECT_LE(r.len, count / n + 1);
        next = r.off + r.len;
      }
      EXPECT_EQ(next, count) << "count " << count << " n " << n;
    }
  }
}

TEST(PartitionTest, SlicesCoverTheBlockAndEmptyBlocksHaveOneSlice) {
  EXPECT_EQ(NumSlices(0, 16), 1u);
  EXPECT_EQ(Slice(0, 16, 0).len, 0u);
  for (size_t len : {1ul, 15ul, 16ul, 17ul, 1000ul}) {
    size_t total = 0;
    for (size_t k = 0; k < NumSlices(len, 16); ++k) {
      Range s = Slice(len, 16, k);
      EXPECT_EQ(s.off, total);
      total += s.len;
    }
    EXPECT_EQ(total, len);
  }
}

TEST(PartitionTest, TagsAreDistinctAcrossPhaseStepSlice) {
  EXPECT_NE(Tag(1, 0, 1), Tag(1, 1, 0));
  EXPECT_NE(Tag(1, 0, 0), Tag(2, 0, 0));
  EXPECT_EQ(Tag(3, 4095, 65535) >> 28, 3u);
}

}  // namespace
}  // namespace ftccl::algo
