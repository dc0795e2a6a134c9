// Scenario files as `faultline validate` reads them (ExpandScenario, every matrix
// combination). Properties: no exception or crash; a file is either valid (at least one run,
// no diagnostic) or has diagnostics; every diagnostic names the file (or a host file the
// scenario says is not valid) and a line and column
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
  // An inventory's `file:` may name a readable host file, whose errors name it; the scenario
  // then says at its `file:` that the host file is not valid.
  bool host_file_named = false;
  for (const auto& d : r.diagnostics) {
    host_file_named |= d.file == "f.yaml" && d.message.rfind("the host file ", 0) == 0;
  }
  for (const auto& d : r.diagnostics) {
    const std::string s = d.ToString();
    FUZZ_CHECK((d.file == "f.yaml" || host_file_named) && !d.message.empty(), "%s", s.c_str());
    FUZZ_CHECK(d.loc.line > 0 || d.message.rfind("malformed scenario", 0) != 0, "%s", s.c_str());
  }
  return 0;
}
