// The benchmark harness's own arithmetic: size layouts, the sweep, and that the check values
// accept exactly the right results (a check that never fails checks nothing); and that the
// harness's busbw is the workload's one rule (workload::BusBwFactor).
#include "perf_common.h"
#include "workload/check_values.h"

#include <gtest/gtest.h>

#include <cstring>
#include <tuple>
#include <vector>

namespace faultline::bench {
namespace {

TEST(PerfCommonTest, BusBwFactorsFollowNcclTests) {
  EXPECT_DOUBLE_EQ(workload::BusBwFactor(Coll::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(workload::BusBwFactor(Coll::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(workload::BusBwFactor(Coll::kReduceScatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(workload::BusBwFactor(Coll::kAllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(workload::BusBwFactor(Coll::kBroadcast, 8), 1.0);
}

TEST(PerfCommonTest, LayoutSplitsTotalBytesOverRanks) {
  SizeLayout l = LayoutFor(Coll::kAllGather, DType::kF32, 4, 1 << 20);
  EXPECT_EQ(l.count, (1u << 20) / 16);
  EXPECT_EQ(l.send_elems, l.count);
  EXPECT_EQ(l.recv_elems, 4 * l.count);
  EXPECT_EQ(l.bytes, 1u << 20);
  l = LayoutFor(Coll::kReduceScatter, DType::kF16, 3, 1000);
  EXPECT_EQ(l.count, 166u);
  EXPECT_EQ(l.send_elems, 498u);
  EXPECT_EQ(l.bytes, 996u);
  l = LayoutFor(Coll::kAllReduce, DType::kF64, 4, 3);
  EXPECT_EQ(l.count, 1u);  // never an empty collective
}

TEST(PerfCommonTest, SweepMultipliesAndStopsAtMax) {
  EXPECT_EQ(SizeSweep(1 << 20, 64 << 20, 2).size(), 7u);
  EXPECT_EQ(SizeSweep(5, 5, 2), std::vector<size_t>{5});
  EXPECT_EQ(SizeSweep(1, 10, 1.5), (std::vector<size_t>{1, 2, 3, 4, 6, 9}));
}

TEST(PerfCommonTest, HalfAndBF16RoundTripSmallIntegers) {
  for (int v = -300; v <= 300; ++v) {
    EXPECT_EQ(HalfToFloat(FloatToHalf(static_cast<float>(v))), static_cast<float>(v));
  }
  for (int v = -256; v <= 256; ++v) {
    EXPECT_EQ(BF16ToFloat(FloatToBF16(static_cast<float>(v))), static_cast<float>(v));
  }
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);                // rounds to infinity
  EXPECT_EQ(HalfToFloat(0x0001), 5.9604644775390625e-8f);  // smallest subnormal
}

// Computes every rank's correct output from the ranks' filled inputs, the slow obvious way.
template <typename C>
struct Simulate {
  static std::vector<std::vector<char>> Run(const PerfOptions& o, const SizeLayout& l) {
    using S = typename C::Storage;
    using A = typename C::Arith;
    const int n = o.ranks;
    std::vector<std::vector<S>> in(n, std::vector<S>(l.send_elems));
    for (int r = 0; r < n; ++r) FillInput(o, l, r, in[r].data());
    auto reduce = [&](size_t i) {
      A acc = C::Decode(in[0][i]);
      for (int r = 1; r < n; ++r)
        acc = C::Decode(C::Encode(Combine(o.redop, acc, C::Decode(in[r][i]))));
      if (o.redop == RedOp::kAvg) acc = acc / static_cast<A>(n);
      return C::Encode(acc);
    };
    std::vector<std::vector<char>> out(n, std::vector<char>(l.recv_elems * sizeof(S)));
    for (int rank = 0; rank < n; ++rank) {
      S* dst = reinterpret_cast<S*>(out[rank].data());
      for (size_t i = 0; i < l.recv_elems; ++i) {
        const size_t block = i / l.count, off = i % l.count;
        switch (o.coll) {
          case Coll::kAllReduce:
            dst[i] = reduce(i);
            break;
          case Coll::kReduceScatter:
            dst[i] = reduce(rank * l.count + i);
            break;
          case Coll::kAllGather:
            dst[i] = in[block][off];
            break;
          case Coll::kBroadcast:
            dst[i] = in[o.root][i];
            break;
          case Coll::kAllToAll:
            dst[i] = in[block][rank * l.count + off];
            break;
        }
      }
    }
    return out;
  }
};

class CheckValuesTest : public ::testing::TestWithParam<std::tuple<Coll, DType, RedOp, int>> {};

TEST_P(CheckValuesTest, AcceptRightResultsAndCountWrongOnes) {
  PerfOptions o;
  std::tie(o.coll, o.dtype, o.redop, o.ranks) = GetParam();
  o.root = o.ranks - 1;
  const SizeLayout l = LayoutFor(o.coll, o.dtype, o.ranks, 3000);
  const workload::CheckSpec spec = SpecOf(o);
  std::vector<std::vector<char>> out = DispatchType<Simulate>(o.dtype, o, l);
  const size_t ts = DTypeSize(o.dtype);
  for (int rank = 0; rank < o.ranks; ++rank) {
    EXPECT_EQ(CountWrong(o, l, rank, out[rank].data()), 0u) << "rank " << rank;
    std::vector<char> bad = out[rank];
    std::memset(bad.data() + 7 * ts, 0xFF, ts);                               // the poison
    std::memcpy(bad.data() + (l.recv_elems - 1) * ts, out[rank].data(), ts);  // misplaced
    const uint64_t first_last_equal =
        std::memcmp(out[rank].data(), out[rank].data() + (l.recv_elems - 1) * ts, ts) == 0;
    EXPECT_EQ(CountWrong(o, l, rank, bad.data()), 2u - first_last_equal) << "rank " << rank;
    // The reference copy a long-running workload compares with holds the same results and
    // counts the same wrong elements (avg of floating types may differ from the simulation in
    // its last bit: judged within the tolerance, not bit for bit).
    std::vector<char> ref(l.recv_elems * ts);
    workload::FillExpected(spec, l, rank, ref.data());
    const bool floating = o.dtype == DType::kF32 || o.dtype == DType::kF64 ||
                          o.dtype == DType::kF16 || o.dtype == DType::kBF16;
    if (o.redop != RedOp::kAvg || !floating) {
      EXPECT_EQ(std::memcmp(ref.data(), out[rank].data(), ref.size()), 0) << "rank " << rank;
    }
    EXPECT_EQ(CountWrong(o, l, rank, ref.data()), 0u) << "rank " << rank;
    EXPECT_EQ(workload::CountWrongAgainst(spec, l, ref.data(), out[rank].data()), 0u)
        << "rank " << rank;
    EXPECT_EQ(workload::CountWrongAgainst(spec, l, ref.data(), bad.data()), 2u - first_last_equal)
        << "rank " << rank;
  }
  // A rank's result is not another rank's.
  if (o.coll == Coll::kReduceScatter || o.coll == Coll::kAllToAll) {
    EXPECT_GT(CountWrong(o, l, 0, out[1].data()), l.recv_elems / 4);
    std::vector<char> ref0(l.recv_elems * DTypeSize(o.dtype));
    workload::FillExpected(spec, l, 0, ref0.data());
    EXPECT_GT(workload::CountWrongAgainst(spec, l, ref0.data(), out[1].data()), l.recv_elems / 4);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Reductions, CheckValuesTest,
    ::testing::Combine(::testing::Values(Coll::kAllReduce, Coll::kReduceScatter),
                       ::testing::Values(DType::kF32, DType::kF64, DType::kF16, DType::kBF16,
                                         DType::kI32, DType::kI64, DType::kU8),
                       ::testing::Values(RedOp::kSum, RedOp::kProd, RedOp::kMin, RedOp::kMax,
                                         RedOp::kAvg),
                       ::testing::Values(2, 5, 9)));

INSTANTIATE_TEST_SUITE_P(
    DataMovement, CheckValuesTest,
    ::testing::Combine(::testing::Values(Coll::kAllGather, Coll::kBroadcast, Coll::kAllToAll),
                       ::testing::Values(DType::kF32, DType::kBF16, DType::kU8),
                       ::testing::Values(RedOp::kSum), ::testing::Values(2, 5)));

}  // namespace
}  // namespace faultline::bench
