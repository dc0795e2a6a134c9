// StagingPool: freed buffers are handed out again (no fresh pages for the next early message),
// only when they fit, and no more than the bound is kept.
#include "transport/engine/staging_pool.h"

#include <gtest/gtest.h>

namespace ftccl::transport::engine {
namespace {

TEST(StagingPool, ReusesAFreedBufferOfTheSameSize) {
  StagingPool pool(8 << 20);
  uint8_t* first = nullptr;
  {
    StagingPool::Buffer b = pool.Get(1 << 20);
    ASSERT_NE(b.get(), nullptr);
    first = b.get();
    EXPECT_EQ(pool.idle_bytes(), 0u);
  }
  EXPECT_EQ(pool.idle_bytes(), 1u << 20);
  StagingPool::Buffer again = pool.Get(1 << 20);
  EXPECT_EQ(again.get(), first);
  EXPECT_EQ(pool.idle_bytes(), 0u);
}

TEST(StagingPool, ReusesOnlyBuffersThatFitWithoutMuchWaste) {
  StagingPool pool(64 << 20);
  uint8_t* small = nullptr;
  uint8_t* big = nullptr;
  {
    StagingPool::Buffer s = pool.Get(4096);
    StagingPool::Buffer b = pool.Get(4 << 20);
    small = s.get();
    big = b.get();
  }
  // Too small for 1 MiB, and 4 MiB would waste more than half: a new buffer.
  StagingPool::Buffer mid = pool.Get(1 << 20);
  EXPECT_NE(mid.get(), small);
  EXPECT_NE(mid.get(), big);
  EXPECT_EQ(mid.capacity(), 1u << 20);
  // 3 MiB fits the idle 4 MiB one.
  StagingPool::Buffer three = pool.Get(3 << 20);
  EXPECT_EQ(three.get(), big);
  EXPECT_EQ(three.capacity(), 4u << 20);
}

TEST(StagingPool, KeepsNoMoreThanItsBound) {
  StagingPool pool(2 << 20);
  {
    StagingPool::Buffer a = pool.Get(1 << 20);
    StagingPool::Buffer b = pool.Get(1 << 20);
    StagingPool::Buffer c = pool.Get(1 << 20);
  }
  EXPECT_EQ(pool.idle_bytes(), 2u << 20);
}

TEST(StagingPool, MovedBufferReturnsOnce) {
  StagingPool pool(8 << 20);
  {
    StagingPool::Buffer a = pool.Get(1 << 20);
    StagingPool::Buffer b = std::move(a);
    EXPECT_EQ(a.get(), nullptr);
    StagingPool::Buffer c;
    c = std::move(b);
    EXPECT_NE(c.get(), nullptr);
  }
  EXPECT_EQ(pool.idle_bytes(), 1u << 20);
}

}  // namespace
}  // namespace ftccl::transport::engine
