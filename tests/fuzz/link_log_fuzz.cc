// Incident logs as `faultline import` reads them: ParseIncidentLog (every source: kernel, ip
// monitor, switches, RDMA ports and ibstat, NCCL / PyTorch / ncclras), then ImportLinkEvents
// with the first devices found mapped to rails, and ImportIncident of the whole log with the
// first switch ports and processes mapped too (clock domains, symptoms into reproduce:). Properties: no exception or crash; every link
// event, symptom, clock sample and warning names a line of the input and the file; what the
// importer returns as a scenario validates (its contract).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runner/incident/incident_import.h"
#include "runner/core/scenario.h"
#include "tests/fuzz/fuzz_check.h"

using namespace faultline::runner;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  int lines = 0;  // as the parser counts them: a last line without '\n' counts
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == '\n' || i + 1 == size) ++lines;
  }
  const ParsedLog parsed = ParseIncidentLog(text, "f.log", "n0", 2026);
  auto in_input = [&](const std::string& file, int line) {
    return file == "f.log" && line >= 1 && line <= lines;
  };
  for (const Symptom& s : parsed.symptoms) {
    FUZZ_CHECK(in_input(s.file, s.line), "symptom at line %d of %d", s.line, lines);
    FUZZ_CHECK(!s.kind.empty(), "symptom without a kind at line %d", s.line);
    FUZZ_CHECK(s.wall_ns.has_value() == (s.wall_res_ns > 0), "symptom wall resolution, line %d",
               s.line);
  }
  for (const ClockSample& c : parsed.clocks) {
    FUZZ_CHECK(in_input(c.file, c.line), "clock sample at line %d of %d", c.line, lines);
    FUZZ_CHECK(c.wall_res_ns > 0, "clock sample without a resolution, line %d", c.line);
  }
  for (const LogWarning& w : parsed.warnings) {
    FUZZ_CHECK(in_input(w.file, w.line), "warning at line %d of %d", w.line, lines);
  }
  for (const LinkEvent& e : parsed.links) {
    FUZZ_CHECK(in_input(e.file, e.line), "link event at line %d of %d", e.line, lines);
    FUZZ_CHECK(!e.names.empty(), "link event without a device at line %d", e.line);
    FUZZ_CHECK(e.wall_ns.has_value() == (e.wall_res_ns > 0), "link wall resolution, line %d",
               e.line);
  }
  const std::vector<LinkEvent> events = ParseLinkLog(text, "f.log");
  FUZZ_CHECK(events.size() == parsed.links.size(), "ParseLinkLog and ParseIncidentLog differ");
  ImportOptions opts;
  for (const LinkEvent& e : events) {
    FUZZ_CHECK(e.line >= 1 && e.file == "f.log", "line %d", e.line);
    if (e.names.empty() || opts.map.size() >= 4) continue;
    const int n = static_cast<int>(opts.map.size());
    opts.map.emplace(e.names.front(), RailRef{n / 2, n % 2, LinkSide::kHost});
  }
  if (events.empty()) return 0;
  auto r = ImportLinkEvents(events, opts);
  if (!r.ok()) return 0;
  const ExpandOutcome v = ExpandScenario(r->yaml, "imported.yaml");
  std::string why;
  for (const auto& d : v.diagnostics) why += d.ToString() + "\n";
  FUZZ_CHECK(v.ok(), "the imported scenario does not validate:\n%s%s", why.c_str(),
             r->yaml.c_str());
  // The whole log: switch ports and processes mapped as well.
  ImportOptions all = opts;
  for (const LinkEvent& e : parsed.links) {
    if (e.source != LinkSource::kSwitch || all.switch_map.size() >= 2) continue;
    all.switch_map.emplace(e.node + ":" + e.names.front(),
                           RailRef{0, static_cast<int>(all.switch_map.size()), LinkSide::kSwitch});
  }
  for (const Symptom& s : parsed.symptoms) {
    if (s.node.empty() || !s.local_rank || all.rank_map.size() >= 4) continue;
    const int n = static_cast<int>(all.rank_map.size());
    all.rank_map.emplace(s.node + ":" + std::to_string(*s.local_rank), RankRef{n / 2, n % 2});
  }
  auto whole = ImportIncident({parsed}, all);
  if (!whole.ok()) return 0;
  const ExpandOutcome w = ExpandScenario(whole->yaml, "imported.yaml");
  why.clear();
  for (const auto& d : w.diagnostics) why += d.ToString() + "\n";
  FUZZ_CHECK(w.ok(), "the imported incident does not validate:\n%s%s", why.c_str(),
             whole->yaml.c_str());
  return 0;
}
