// Link-event logs as `faultline import` reads them: ParseLinkLog, then ImportLinkEvents with
// the first devices found mapped to rails. Properties: no exception or crash; every event
// names its line; what the importer returns as a scenario validates (its contract).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runner/core/incident_import.h"
#include "runner/core/scenario.h"
#include "tests/fuzz/fuzz_check.h"

using namespace faultline::runner;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::vector<LinkEvent> events = ParseLinkLog(text, "f.log");
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
  return 0;
}
