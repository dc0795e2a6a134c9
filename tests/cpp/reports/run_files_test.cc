// reports/run_files.h: each data file written from rows parses back (run_data.h) into the
// same rows to the printed precision, with missing cells kept missing; a writer handed rows
// that no file could hold refuses them.
#include "reports/run_files.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

namespace faultline::reports {
namespace {

TEST(RunFiles, TimeseriesParsesBackToTheSameRows) {
  std::vector<SeriesPoint> rows = {{0, 0.5123456, 0.5234567, 11.1111, 1048576, 1.23456},
                                   {7, 12.25, 12.5, 250.0, 4, 0.0}};
  auto back = ParseTimeseriesCsv(TimeseriesCsv(rows));
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ((*back)[i].index, rows[i].index);
    EXPECT_NEAR((*back)[i].start_s, rows[i].start_s, 5e-7);
    EXPECT_NEAR((*back)[i].end_s, rows[i].end_s, 5e-7);
    EXPECT_NEAR((*back)[i].duration_ms, rows[i].duration_ms, 5e-4);
    EXPECT_EQ((*back)[i].bytes, rows[i].bytes);
    EXPECT_NEAR((*back)[i].busbw_gbps, rows[i].busbw_gbps, 5e-5);
  }
  EXPECT_EQ(TimeseriesCsv({}), "index,start_s,end_s,duration_ms,bytes,busbw_gbps\n");
}

TEST(RunFiles, RailsParseBackWithTheirPortsAndEmptyCells) {
  RailsTable t;
  t.t_s = {0.02, 0.04};
  RailColumn a;
  a.host = 0;
  a.rail = 1;
  a.tx = true;
  a.values = {0.5, std::nullopt};
  RailColumn b;
  b.host = 3;
  b.rank = 2;
  b.rail = 0;
  b.tx = false;
  b.rdma = true;
  b.values = {std::nullopt, 0.1234567};
  t.columns = {a, b};
  const std::string csv = RailsCsv(t);
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "t_s,h0_r1_tx_gbps,h3_n2_r0_rdma_rx_gbps");
  auto back = ParseRailsCsv(csv);
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->t_s.size(), 2u);
  EXPECT_NEAR(back->t_s[1], 0.04, 5e-7);
  ASSERT_EQ(back->columns.size(), 2u);
  for (size_t c = 0; c < 2; ++c) {
    const RailColumn& want = t.columns[c];
    const RailColumn& got = back->columns[c];
    EXPECT_EQ(got.name, RailColumnName(want));
    EXPECT_EQ(got.host, want.host);
    EXPECT_EQ(got.rank, want.rank);
    EXPECT_EQ(got.rail, want.rail);
    EXPECT_EQ(got.tx, want.tx);
    EXPECT_EQ(got.rdma, want.rdma);
    ASSERT_EQ(got.values.size(), want.values.size());
    for (size_t i = 0; i < want.values.size(); ++i) {
      ASSERT_EQ(got.values[i].has_value(), want.values[i].has_value()) << c << "," << i;
      if (want.values[i]) {
        EXPECT_NEAR(*got.values[i], *want.values[i], 5e-7);
      }
    }
  }
}

TEST(RunFiles, RailsRefuseAColumnOfAnotherLength) {
  RailsTable t;
  t.t_s = {0.02, 0.04};
  RailColumn a;
  a.values = {1.0};
  t.columns = {a};
  EXPECT_THROW(RailsCsv(t), std::invalid_argument);
}

TEST(RunFiles, CclEventsParseBackAndOtherLinesAreKept) {
  EventRow e;
  e.t_s = 1.25;
  e.rank = 3;
  e.kind = "path_down";
  e.path = 1;
  e.reason = "rank 2: rail 1 link down";
  std::vector<nlohmann::json> lines = {{{"type", "fault"}, {"id", "down"}}, CclEventJson(e)};
  const std::string text = EventsJsonl(lines);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);
  EXPECT_EQ(nlohmann::json::parse(text.substr(0, text.find('\n'))), lines[0]);
  auto back = ParseEventsJsonl(text);
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->size(), 1u);
  EXPECT_EQ((*back)[0].t_s, e.t_s);
  EXPECT_EQ((*back)[0].rank, e.rank);
  EXPECT_EQ((*back)[0].kind, e.kind);
  EXPECT_EQ((*back)[0].path, e.path);
  EXPECT_EQ((*back)[0].reason, e.reason);
}

TEST(RunFiles, EventsRefuseALineWithoutAType) {
  std::vector<nlohmann::json> lines = {{{"t_s", 1.0}}};
  EXPECT_THROW(EventsJsonl(lines), std::invalid_argument);
  std::vector<nlohmann::json> scalar = {nlohmann::json(3)};
  EXPECT_THROW(EventsJsonl(scalar), std::invalid_argument);
}

}  // namespace
}  // namespace faultline::reports
