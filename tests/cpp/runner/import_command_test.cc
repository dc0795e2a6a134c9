// `faultline import`'s logic (runner/incident/import_command.h): the flags into ImportOptions
// and their errors, a directory of per-host logs, the year of stamps that print none, and the
// messages and result of a whole run.
#include "runner/incident/import_command.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace faultline::runner {
namespace {

namespace fs = std::filesystem;

// A fresh folder under the system's temp folder, removed at the end of the test.
class TempDir final {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("import-command-test-" + std::to_string(::getpid()) + "-" + std::to_string(next_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string Write(const std::string& name, const std::string& text) const {
    const fs::path p = path_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  std::string path() const { return path_.string(); }

 private:
  static inline int next_ = 0;
  fs::path path_;
};

ImportFlags Flags(std::vector<std::string> logs, std::vector<std::string> maps) {
  ImportFlags f;
  f.logs = std::move(logs);
  f.maps = std::move(maps);
  return f;
}

// A 500 ms outage of eth2 by the kernel clock (plain dmesg), and a link of an unmapped eth9.
constexpr const char* kDmesg =
    "[  100.000000] mlx5_core 0000:08:00.0 eth2: Link down\n"
    "[  100.500000] mlx5_core 0000:08:00.0 eth2: Link up\n"
    "[  101.000000] mlx5_core 0000:09:00.0 eth9: Link down\n";

TEST(ImportCommand, FlagsBecomeOptions) {
  ImportFlags f = Flags({"x.log"}, {"eth2=host0/rail1", "eth3=host1/rail0/switch"});
  f.switch_maps = {"leaf1:Ethernet1/1=host0/rail1"};
  f.rank_maps = {"node17:3=host1/rank1"};
  f.reproduce_ccl = "nccl";
  f.reproduce_outcome = "hung";
  f.within = "45s";
  f.at = "1500ms";
  f.hosts = 3;
  f.ranks_per_host = 2;
  auto o = OptionsFromFlags(f);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->at_ns, 1'500'000'000);
  EXPECT_EQ(o->tail_ns, 3'000'000'000);
  ASSERT_EQ(o->map.size(), 2u);
  EXPECT_EQ(o->map.at("eth2").rail, 1);
  EXPECT_EQ(o->map.at("eth3").side, LinkSide::kSwitch);
  EXPECT_EQ(o->switch_map.at("leaf1:Ethernet1/1").host, 0);
  EXPECT_EQ(o->rank_map.at("node17:3").rank, 1);
  EXPECT_EQ(o->reproduce_ccl, CclName::kNccl);
  EXPECT_EQ(o->reproduce_outcome, "hung");
  EXPECT_EQ(o->within_ns, 45'000'000'000);
  EXPECT_EQ(o->hosts, 3);
  EXPECT_FALSE(o->rails.has_value());
  EXPECT_EQ(o->ranks_per_host, 2);
}

TEST(ImportCommand, BadFlagsSayWhich) {
  auto message = [](const ImportFlags& f) {
    auto o = OptionsFromFlags(f);
    EXPECT_FALSE(o.ok());
    return o.ok() ? std::string() : o.status().message();
  };
  EXPECT_EQ(message(Flags({"x"}, {})),
            "give --map (host devices) or --map-switch (switch ports): name the rail of each "
            "device");
  EXPECT_NE(message(Flags({"x"}, {"eth2=rail1"})).find("--map 'eth2=rail1': expected"),
            std::string::npos);
  ImportFlags f = Flags({"x"}, {"eth2=host0/rail0"});
  f.reproduce_ccl = "mpich";
  EXPECT_EQ(message(f), "--reproduce-ccl: gloo or nccl, not 'mpich'");
  f = Flags({"x"}, {"eth2=host0/rail0"});
  f.reproduce_outcome = "survived";
  EXPECT_EQ(message(f), "--reproduce-outcome: aborted_clean, hung or crashed, not 'survived'");
  f = Flags({"x"}, {"eth2=host0/rail0"});
  f.within = "0s";
  EXPECT_EQ(message(f), "--within: give a duration, e.g. 30s");
  f = Flags({"x"}, {"eth2=host0/rail0"});
  f.tail = "soon";
  EXPECT_EQ(message(f).rfind("--at/--tail: ", 0), 0u);
}

TEST(ImportCommand, HostOfALogFile) {
  EXPECT_EQ(HostOfLogFile("gpu-node-17.log"), "gpu-node-17");
  EXPECT_EQ(HostOfLogFile("gpu-node-17.kern.log.1"), "gpu-node-17");
  EXPECT_EQ(HostOfLogFile("10.0.0.17.log"), "10.0.0.17");
  EXPECT_EQ(HostOfLogFile("10.0.0.17"), "10.0.0.17");
  EXPECT_EQ(HostOfLogFile("leaf1"), "leaf1");
}

TEST(ImportCommand, ReadsFilesFoldersAndStdin) {
  TempDir dir;
  fs::create_directories(dir.path() + "/hosts");
  dir.Write("hosts/node2.log", "two\n");
  dir.Write("hosts/node1.log", "one\n");
  const std::string single = dir.Write("single.txt", "single\n");
  std::istringstream in("from stdin\n");
  auto inputs = ReadLogInputs({dir.path() + "/hosts", single, "-"}, in);
  ASSERT_TRUE(inputs.ok()) << inputs.status().ToString();
  ASSERT_EQ(inputs->size(), 4u);
  EXPECT_EQ((*inputs)[0].node, "node1");  // sorted by name
  EXPECT_EQ((*inputs)[0].text, "one\n");
  EXPECT_EQ((*inputs)[1].node, "node2");
  EXPECT_EQ((*inputs)[2].path, single);
  EXPECT_EQ((*inputs)[2].node, "");
  EXPECT_EQ((*inputs)[3].text, "from stdin\n");

  fs::create_directories(dir.path() + "/empty");
  auto empty = ReadLogInputs({dir.path() + "/empty"}, in);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().message(), dir.path() + "/empty holds no log file");
  auto missing = ReadLogInputs({dir.path() + "/nope.log"}, in);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "cannot read " + dir.path() + "/nope.log");
}

TEST(ImportCommand, StampsWithoutAYearTakeTheYearOfThoseWithOne) {
  // A syslog switch (no year) beside a host whose journal prints ISO stamps of 2026.
  const std::vector<LogInput> inputs = {
      {"host.log", "node1",
       "2026-11-28T03:14:07.100000+00:00 node1 kernel: [ 100.000000] mlx5_core 0000:08:00.0 "
       "eth2: Link down\n"},
      {"leaf.log", "leaf1",
       "Nov 28 03:14:07 leaf1 Ebra: %LINEPROTO-5-UPDOWN: Line protocol on Interface "
       "Ethernet1/1, changed state to down\n"}};
  const std::vector<ParsedLog> in2000 = ParseLogInputs(inputs, 1999);
  ASSERT_EQ(in2000.size(), 2u);
  EXPECT_EQ(YearOfStamps(in2000), 2026);
  const std::vector<ParsedLog> logs = ParseLogInputs(inputs, 0);
  ASSERT_EQ(logs[1].links.size(), 1u);
  ASSERT_TRUE(logs[1].links[0].wall_ns.has_value());
  ASSERT_TRUE(logs[0].links[0].wall_ns.has_value());
  // Both on 2026-11-28 03:14:07: within a second of each other.
  EXPECT_LT(std::llabs(*logs[1].links[0].wall_ns - *logs[0].links[0].wall_ns), 1'000'000'000);
  // Without any stamp that lacks a year there is nothing to infer.
  EXPECT_EQ(YearOfStamps({logs[0]}), std::nullopt);
}

TEST(ImportCommand, RunWritesTheScenarioAndSaysWhatItIgnored) {
  TempDir dir;
  const std::string log = dir.Write("dmesg.txt", kDmesg);
  std::istringstream in;
  ImportRun run = RunImport(Flags({log}, {"eth2=host0/rail1"}), in);
  ASSERT_TRUE(run.result.has_value()) << (run.messages.empty() ? "" : run.messages.back());
  EXPECT_EQ(run.result->faults, 1);
  EXPECT_EQ(run.result->permanent, 0);
  EXPECT_NE(run.result->yaml.find("type: link_down, target: {host: 0, rail: 1, side: host}, "
                                  "for: 500ms"),
            std::string::npos)
      << run.result->yaml;
  EXPECT_EQ(run.messages,
            std::vector<std::string>{"ignored the events of eth9 (no mapping for it)"});
  EXPECT_EQ(ImportSummary(*run.result, ""),
            "1 fault(s) (0 permanent) from 2 link event(s), 0 symptom(s)");
  EXPECT_EQ(ImportSummary(*run.result, "out.yaml"),
            "1 fault(s) (0 permanent) from 2 link event(s), 0 symptom(s) -> out.yaml");
}

TEST(ImportCommand, AFailedRunWarnsOfSkippedLinesThenSaysWhy) {
  TempDir dir;
  const std::string log = dir.Write(
      "job.out", "[2026-11-28 03:14:07] node17:1234:1290 [3] NCCL WARN\n" + std::string(kDmesg));
  std::istringstream in;
  ImportRun run = RunImport(Flags({log}, {"eth7=host0/rail0"}), in);
  EXPECT_FALSE(run.result.has_value());
  ASSERT_EQ(run.messages.size(), 2u);
  EXPECT_EQ(run.messages[0].rfind("warning: " + log + ":1: ", 0), 0u) << run.messages[0];
  EXPECT_NE(run.messages[0].find("(line skipped)"), std::string::npos);
  EXPECT_EQ(run.messages[1].rfind("no link event of a mapped device", 0), 0u) << run.messages[1];
  EXPECT_EQ(WarningMessage({"f.log", 0, "why"}), "warning: f.log: why");
}

}  // namespace
}  // namespace faultline::runner
