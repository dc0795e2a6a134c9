// Which runs `faultline run` makes of the scenarios a file stands for: `--only KEY=VALUE`
// keeps the matrix combinations with that value, `--seeds N` repeats every run with N seeds.
// Pure: no I/O, unit-tested in tests/cpp/runner/run_selection_test.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runner/core/scenario.h"

namespace faultline::runner {

struct RunSelection {
  // KEY=VALUE pairs (KEY one of kMatrixKeys). A run whose matrix varies KEY is kept only when
  // its value, spelled as in the file, is VALUE; a run whose matrix does not vary KEY is
  // kept (the filter chooses among combinations, not among files). Every pair must hold.
  std::vector<std::pair<std::string, std::string>> only;
  // Repeat every run with seeds base, base+1, ..., base+seeds-1, where base is `base_seed`
  // when set (`--seed`), else the run's own seed. Each copy gets `seed=S` appended to its
  // matrix values (name and directory). 1 leaves the runs as they are.
  int seeds = 1;
  std::optional<uint64_t> base_seed;
};

// Parses "KEY=VALUE" for --only. Returns an error message for a malformed entry or a KEY that
// is not a matrix key.
std::optional<std::string> ParseOnly(const std::string& text,
                                     std::pair<std::string, std::string>* out);

// Applies the selection to the runs of one file, seeds first, then `only` (so `--only seed=S`
// works with --seeds). Returns an error message, leaving `runs` unchanged, when --seeds > 1
// and the file's matrix varies `seed` itself, or seeds < 1. An empty result is not an error
// here (another file may match); the caller decides.
std::optional<std::string> SelectRuns(const RunSelection& selection, std::vector<Scenario>* runs);

}  // namespace faultline::runner
