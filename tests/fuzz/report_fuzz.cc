// report.json as `faultline compare` reads it (ParseReport), then what compare does with it:
// CompareRuns of the report against itself and FormatComparison, and RunStats/FormatStats.
// Properties: no exception or crash; a report compared with itself has no regression.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "reports/compare.h"
#include "reports/run_data.h"
#include "tests/fuzz/fuzz_check.h"

using namespace faultline::reports;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto r = ParseReport(text, "run");
  if (!r.ok()) return 0;
  const std::vector<nlohmann::json> a{*r};
  const std::vector<nlohmann::json> b{*r, *r};
  FUZZ_CHECK(CheckSameSchema(a, b).ok(), "a report's schema differs from itself");
  const Comparison c = CompareRuns(a, b, 0.1);
  FUZZ_CHECK(c.Regressions() == 0, "a report regressed against itself:\n%s",
             FormatComparison(c).c_str());
  (void)FormatComparison(c);
  (void)FormatStats(RunStats(b));
  return 0;
}
