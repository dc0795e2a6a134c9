#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "reduce.h"

namespace ftccl {
namespace {

TEST(ReduceTest, FloatOps) {
  std::vector<float> a = {1, -2, 3.5f, 0}, b = {4, 5, -1, 0}, d(4);
  ReduceInto(DataType::kF32, ReduceOp::kSum, d.data(), a.data(), b.data(), 4);
  EXPECT_EQ(d, (std::vector<float>{5, 3, 2.5f, 0}));
  ReduceInto(DataType::kF32, ReduceOp::kProd, d.data(), a.data(), b.data(), 4);
  EXPECT_EQ(d, (std::vector<float>{4, -10, -3.5f, 0}));
  ReduceInto(DataType::kF32, ReduceOp::kMin, d.data(), a.data(), b.data(), 4);
  EXPECT_EQ(d, (std::vector<float>{1, -2, -1, 0}));
  ReduceInto(DataType::kF32, ReduceOp::kMax, d.data(), a.data(), b.data(), 4);
  EXPECT_EQ(d, (std::vector<float>{4, 5, 3.5f, 0}));
}

TEST(ReduceTest, InPlaceAliasing) {
  std::vector<double> a = {1, 2, 3}, b = {10, 20, 30};
  ReduceInto(DataType::kF64, ReduceOp::kSum, a.data(), a.data(), b.data(), 3);
  EXPECT_EQ(a, (std::vector<double>{11, 22, 33}));
}

TEST(ReduceTest, IntegersWrap) {
  std::vector<uint8_t> a = {250, 3}, b = {10, 200}, d(2);
  ReduceInto(DataType::kU8, ReduceOp::kSum, d.data(), a.data(), b.data(), 2);
  EXPECT_EQ(d, (std::vector<uint8_t>{4, 203}));
  std::vector<int32_t> x = {std::numeric_limits<int32_t>::max(), -7}, y = {1, 3}, z(2);
  ReduceInto(DataType::kI32, ReduceOp::kSum, z.data(), x.data(), y.data(), 2);
  EXPECT_EQ(z[0], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(z[1], -4);
  std::vector<int64_t> p = {-3, 1LL << 40}, q = {5, 4}, o(2);
  ReduceInto(DataType::kI64, ReduceOp::kProd, o.data(), p.data(), q.data(), 2);
  EXPECT_EQ(o, (std::vector<int64_t>{-15, 1LL << 42}));
}

TEST(ReduceTest, HalfTypesRoundEachStep) {
  // 2048 + 1 is not representable in f16 (spacing 2 above 2048): rounds to even, 2048.
  std::vector<uint16_t> a = {FloatToHalf(2048), FloatToHalf(1.5f)}, b = {FloatToHalf(1), FloatToHalf(2)}, d(2);
  ReduceInto(DataType::kF16, ReduceOp::kSum, d.data(), a.data(), b.data(), 2);
  EXPECT_EQ(HalfToFloat(d[0]), 2048.0f);
  EXPECT_EQ(HalfToFloat(d[1]), 3.5f);
  std::vector<uint16_t> c = {FloatToBF16(256), FloatToBF16(-1)}, e = {FloatToBF16(1), FloatToBF16(3)};
  ReduceInto(DataType::kBF16, ReduceOp::kSum, d.data(), c.data(), e.data(), 2);
  EXPECT_EQ(BF16ToFloat(d[0]), 256.0f);  // bf16 has 8 significant bits
  EXPECT_EQ(BF16ToFloat(d[1]), 2.0f);
}

TEST(ReduceTest, AvgDividesOnceAtTheEnd) {
  std::vector<int32_t> i = {7, -7, 9};
  FinalizeReduce(DataType::kI32, ReduceOp::kAvg, i.data(), 3, 2);
  EXPECT_EQ(i, (std::vector<int32_t>{3, -3, 4}));
  std::vector<float> f = {9, 3};
  FinalizeReduce(DataType::kF32, ReduceOp::kAvg, f.data(), 2, 4);
  EXPECT_EQ(f, (std::vector<float>{2.25f, 0.75f}));
  std::vector<float> g = {9, 3};
  FinalizeReduce(DataType::kF32, ReduceOp::kSum, g.data(), 2, 4);
  EXPECT_EQ(g, (std::vector<float>{9, 3}));
}

}  // namespace
}  // namespace ftccl
