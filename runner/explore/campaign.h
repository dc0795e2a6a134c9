// `faultline explore`: a seeded campaign over a fault space. Run `index` (0, 1, ...) is the
// scenario Generate(space, seed, index) writes to OUT/runs/run-<index>.yaml, run in process
// like any scenario (RunParsedScenario) into OUT/runs/run-<index>/ and judged by the space's
// invariants. The campaign stops after --runs runs, when --budget has passed (no run starts
// after it), at the first violation, or on SIGINT/SIGTERM. A violation is confirmed by
// re-running (it counts when at least k of n runs fail the same invariant; one that fails
// fewer is recorded as unconfirmed and the campaign goes on) and shrunk
// (runner/explore/shrink.h; candidates under OUT/shrink/), and the smallest failing file is
// OUT/minimal.yaml with a reproduce comment block. OUT gets campaign.json, campaign.html and
// junit.xml (campaign_report.h). With a sweep (sweep.h) it runs each value's runs instead,
// judges them, never stops at a violation and never shrinks. With a replay file it runs that
// file --runs times (default 5) and judges each run the same way (exit 1 when any violated).
// With --jobs N, N runs go at once: at a violation no new run starts, the runs under way end
// and are recorded, and the violation of the lowest index is confirmed and shrunk.
//
// Exit codes (reports/exit_code.h): 0 no violation, 1 a violation (after shrinking), 2 bad
// input (the space, the options), 3 the harness failed (a generated file that does not
// validate, a run that could not run).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "runner/core/scenario.h"

namespace faultline::runner::explore {

struct CampaignOptions {
  std::string space_path;
  std::string out_dir;
  uint64_t seed = 1;
  std::optional<CclName> ccl;        // overrides the space's
  std::optional<int64_t> runs;       // at most this many runs (--runs)
  std::optional<int64_t> budget_ns;  // no run starts after this (--budget)
  // Runs at once (--jobs). Above 1, each generated, swept or replayed run is a child process
  // of its own (its output in OUT/runs/run-<index>.log); confirming and shrinking a violation
  // stay one run at a time, so that another run's load cannot confirm a finding.
  int jobs = 1;
  int confirm_k = 2;
  int confirm_n = 3;
  bool shrink = true;
  int max_candidates = 30;  // shrinking asks about at most this many candidates
  // ... and then about at most this many smaller topologies (ShrinkTopology; 0: none)
  int max_topology_candidates = 6;
  std::string worker_path;  // empty: faultline-worker beside this executable
  // "KIND.PARAM=A..B:N": a sweep (sweep.h) instead of a search; `runs` is then per value.
  std::optional<std::string> sweep;
  // A scenario file (e.g. a minimal.yaml) to run `runs` times (default 5) and judge by the
  // space's invariants, instead of generating runs: how often a finding reproduces.
  std::optional<std::string> replay;
};

// Parses "K/N" (1 <= K <= N <= 20); an error message or nullopt.
std::optional<std::string> ParseConfirm(const std::string& text, int* k, int* n);

int RunCampaign(const CampaignOptions& options);

}  // namespace faultline::runner::explore
