// Scenario files as `faultline validate` reads them (ExpandScenario, every matrix
// combination). Properties: no exception or crash; a file is either valid (at least one run,
// no diagnostic) or has diagnostics; every diagnostic names the file and a line and column
// (a YAML exception caught as "malformed scenario" at 0:0 is a lookup bug to fix).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "runner/core/scenario.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const faultline::runner::ExpandOutcome r = faultline::runner::ExpandScenario(text, "f.yaml");
  FUZZ_CHECK(r.ok() == r.diagnostics.empty(), "runs=%zu diagnostics=%zu", r.runs.size(),
             r.diagnostics.size());
  for (const auto& d : r.diagnostics) {
    const std::string s = d.ToString();
    FUZZ_CHECK(d.file == "f.yaml" && !d.message.empty(), "%s", s.c_str());
    FUZZ_CHECK(d.loc.line > 0 || d.message.rfind("malformed scenario", 0) != 0, "%s", s.c_str());
  }
  return 0;
}
