// What the importer is built from (runner/incident/import_parts.h): the times, precisions and
// fault ids it writes into a scenario, and a clock domain's wall - kernel offset from its
// samples (consistent and not).
#include "runner/incident/import_parts.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace faultline::runner::incident_internal {
namespace {

constexpr int64_t kS = 1'000'000'000;

TEST(ImportParts, TimesAndIdsAsTheScenarioPrintsThem) {
  EXPECT_EQ(RoundMs(1'499'999), 1'000'000);
  EXPECT_EQ(RoundMs(1'500'000), 2'000'000);
  EXPECT_EQ(FormatMs(2 * kS), "2s");
  EXPECT_EQ(FormatMs(1'500'400'000), "1500ms");
  EXPECT_EQ(FormatMs(999'600'000), "1s");
  EXPECT_EQ(FaultId("node17:mlx5_0/1", 2), "node17-mlx5-0-1-down2");
  EXPECT_EQ(FormatPrecision(1'500'000'000), "+-1.50 s");
  EXPECT_EQ(FormatPrecision(2'340'000), "+-2.3 ms");
  EXPECT_EQ(FormatPrecision(500), "+-1 us");
  EXPECT_EQ(FormatSeconds(-1'234'000'000), "-1.234 s");
  EXPECT_EQ(FormatWall(1'764'299'647LL * kS + 123'456'789), "2025-11-28T03:14:07.123Z");
  EXPECT_EQ(FormatWall(-kS), "-1.000 s from the epoch");
  EXPECT_EQ(KernelNs(12.3456789), 12'345'678'900);
  EXPECT_EQ(DomainOf("gpu-node-17", "a.log"), "gpu-node-17");
  EXPECT_EQ(DomainOf("", "a.log"), "file:a.log");
}

ClockSample Sample(double kernel_s, int64_t wall_ns, int64_t res_ns) {
  ClockSample c;
  c.kernel_s = kernel_s;
  c.wall_ns = wall_ns;
  c.wall_res_ns = res_ns;
  return c;
}

TEST(ImportParts, OffsetIsTheMiddleOfTheSamplesIntersection) {
  // Whole-second wall stamps: offset in [990 s, 991 s + 2 us) and [990.6 s, 991.6 s + 2 us).
  const ClockSample a = Sample(10.0, 1000 * kS, kS);
  const ClockSample b = Sample(10.4, 1001 * kS, kS);
  ClockDomain d;
  EstimateOffset({&a, &b}, &d);
  EXPECT_EQ(d.samples, 2);
  EXPECT_TRUE(d.consistent);
  ASSERT_TRUE(d.offset_ns.has_value());
  EXPECT_EQ(*d.offset_ns, 990'800'000'500);
  EXPECT_EQ(*d.precision_ns, 200'000'500);
}

TEST(ImportParts, DisagreeingSamplesTakeTheMedianAndSaySo) {
  // Microsecond wall stamps a second apart for kernel times a second apart the other way.
  const ClockSample a = Sample(10.0, 1000 * kS, 1000);
  const ClockSample b = Sample(9.0, 1000 * kS, 1000);
  ClockDomain d;
  EstimateOffset({&a, &b}, &d);
  EXPECT_FALSE(d.consistent);
  EXPECT_EQ(*d.offset_ns, 991 * kS + 1000);
  EXPECT_EQ(*d.precision_ns, kS / 2 + 1000);
  ClockDomain none;
  EstimateOffset({}, &none);
  EXPECT_EQ(none.samples, 0);
  EXPECT_FALSE(none.offset_ns.has_value());
}

}  // namespace
}  // namespace faultline::runner::incident_internal
