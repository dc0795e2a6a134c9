#include "runner/explore/campaign.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <thread>

#include "base/log.h"
#include "reports/exit_code.h"
#include "reports/write_reports.h"
#include "runner/exec/run.h"
#include "runner/explore/campaign_report.h"
#include "runner/explore/fault_space.h"
#include "runner/explore/generator.h"
#include "runner/explore/invariants.h"
#include "runner/explore/shrink.h"
#include "runner/explore/sweep.h"
#include "workload/adapters/ccl_traits.h"

namespace faultline::runner::explore {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kOk = reports::ToInt(reports::ExitCode::kOk);
constexpr int kViolation = reports::ToInt(reports::ExitCode::kExpectationFailed);
constexpr int kBadInput = reports::ToInt(reports::ExitCode::kBadInput);
constexpr int kHarness = reports::ToInt(reports::ExitCode::kHarnessError);

// The topology and message size of a space's scenario.
TopologyShape ShapeOf(const FaultSpace& sp) {
  const Topology& t = sp.base.topology;
  return {t.hosts, t.ranks_per_host, t.rails, sp.base.workload.bytes};
}

// `sp` with the topology and message size of `shape` (targets cut to what is left).
FaultSpace SpaceWith(const FaultSpace& sp, const TopologyShape& shape) {
  FaultSpace out = sp;
  out.base.topology.hosts = shape.hosts;
  out.base.topology.ranks_per_host = shape.ranks_per_host;
  out.base.topology.rails = shape.rails;
  out.base.workload.bytes = shape.bytes;
  std::erase_if(out.targets.hosts, [&](int h) { return h >= shape.hosts; });
  std::erase_if(out.targets.rails, [&](int r) { return r >= shape.rails; });
  return out;
}

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

bool Write(const fs::path& p, const std::string& text) {
  const Status s = reports::WriteFileAtomically(p.string(), text);
  if (!s.ok()) FL_ERROR("explore", "%s", s.ToString().c_str());
  return s.ok();
}

// One run of one scenario file, judged.
struct Judged {
  int code = 0;
  std::string outcome;
  std::string error;  // could not be run or judged
  std::vector<InvariantResult> invariants;
  nlohmann::json versions;
  std::optional<double> stall_ms;
  double seconds = 0;
  bool Fails(const std::string& invariant) const {
    for (const auto& i : invariants) {
      if (i.name == invariant && i.verdict == Verdict::kFail) return true;
    }
    return false;
  }
};

class Campaign final {
 public:
  Campaign(const CampaignOptions& o, FaultSpace space)
      : o_(o), space_(std::move(space)), out_(o.out_dir) {}

  int Run();

 private:
  // The runs of a sweep (sweep.h); returns the exit code.
  int RunSweep(const SweepSpec& sweep);
  // Runs `file` o_.runs times (default 5), each judged; returns the exit code.
  int RunReplay(const std::string& file);
  // Writes the campaign's files and says what it found; returns `code` (or kHarness when a
  // file could not be written).
  int Finish(int code);
  // Runs generated run `run` from `file` into `dir` and records it.
  RunRecord RunOne(const fs::path& file, int64_t index, const RunFaults& run);
  Judged RunFile(const fs::path& file, const fs::path& dir);
  void ShrinkViolation(const RunRecord& failing);
  bool OutOfBudget() const {
    return o_.budget_ns && Since(t0_) * 1e9 >= static_cast<double>(*o_.budget_ns);
  }
  std::string Header(const std::vector<GenFault>& minimal, int failed, int runs) const;

  const CampaignOptions& o_;
  FaultSpace space_;
  fs::path out_;
  CampaignRecord rec_;
  Clock::time_point t0_ = Clock::now();
  bool interrupted_ = false;
  uint64_t failing_seed_ = 0;  // the scenario seed of the run being shrunk
};

Judged Campaign::RunFile(const fs::path& file, const fs::path& dir) {
  Judged j;
  const auto t0 = Clock::now();
  ParseOutcome p = ParseScenarioFile(file.string());
  if (!p.ok()) {
    j.code = kHarness;
    j.error = "the generated file does not validate: " +
              (p.diagnostics.empty() ? std::string("?") : p.diagnostics.front().ToString());
    return j;
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  RunOptions ro;
  ro.scenario_path = file.string();
  ro.out_dir = dir.string();
  ro.ccl = o_.ccl;
  ro.worker_path = o_.worker_path;
  std::printf("\nfaultline explore: %s -> %s\n", file.c_str(), dir.c_str());
  std::fflush(stdout);
  j.code = RunParsedScenario(std::move(*p.scenario), ro);
  interrupted_ = interrupted_ || RunInterrupted();
  j.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (j.code == kBadInput || j.code == kHarness) {
    j.error = "faultline run of " + file.string() + " ended with exit code " +
              std::to_string(j.code) + " (see its output)";
    return j;
  }
  RunView view = LoadRunView(dir.string());
  if (view.report) {
    j.outcome = view.report->value("outcome", "");
    const auto& env = view.report->value("environment", nlohmann::json::object());
    if (env.is_object()) j.versions = env.value("versions", nlohmann::json());
    const auto& m = view.report->value("metrics", nlohmann::json::object());
    if (m.is_object() && m.value("stall_ms", nlohmann::json()).is_number()) {
      j.stall_ms = m["stall_ms"].get<double>();
    }
  }
  // What the run leaves is read until it is gone, for at most 3 s (ranks reaped, namespaces
  // deleted asynchronously by the kernel's cleanup of their last reference).
  HostState host = ReadHostState();
  if (space_.invariants.nothing_left_behind) {
    for (int i = 0; i < 30 && CheckNothingLeftBehind(view, host).verdict == Verdict::kFail; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      host = ReadHostState();
    }
  }
  j.invariants = CheckInvariants(view, space_.invariants, &host);
  return j;
}

std::string Campaign::Header(const std::vector<GenFault>& minimal, int failed, int runs) const {
  std::string h = "# reproduce:\n";
  h += "#   invariant: " + rec_.shrink->invariant + "\n";
  h += "#   space: " + space_.file + " (sha256 " + space_.sha256 + ")\n";
  h += "#   campaign seed " + std::to_string(rec_.seed) + ", run " +
       std::to_string(rec_.shrink->from_index) + ", shrunk to " + std::to_string(minimal.size()) +
       " fault(s)\n";
  h += "#   ccl: " + rec_.ccl + "; versions: " + rec_.version + "\n";
  h += "#   failed " + std::to_string(failed) + " of " + std::to_string(runs) +
       " run(s) (confirmed when " + std::to_string(rec_.confirm_k) + " of " +
       std::to_string(rec_.confirm_n) + " fail)\n";
  h += "#   replay: faultline run minimal.yaml --out DIR (the invariant is checked by "
       "faultline explore; see campaign.json)\n";
  return h;
}

void Campaign::ShrinkViolation(const RunRecord& failing) {
  rec_.shrink.emplace();
  ShrinkRecord& s = *rec_.shrink;
  s.from_index = failing.index;
  s.invariant = failing.Violation();
  const fs::path dir = out_ / "shrink";
  std::error_code ec;
  fs::create_directories(dir, ec);
  int candidate = 0;
  // The tally of every candidate asked about, by its faults.
  std::map<std::string, std::pair<int, int>> tallies;
  auto key = [](const FaultSpace& sp, const std::vector<GenFault>& fs) {
    std::string k = ShapeOf(sp).Describe() + ";";
    for (const auto& f : fs) k += Describe(f) + ";";
    return k;
  };
  auto confirm = [&](const FaultSpace& sp, const std::vector<GenFault>& faults,
                     bool first_known_failed) {
    const int c = candidate++;
    const fs::path file = dir / ("cand-" + std::to_string(c) + ".yaml");
    RunFaults rf{failing_seed_, faults};
    RunOrigin origin{
        rec_.seed, failing.index,
        "shrink candidate " + std::to_string(c) + " of run " + std::to_string(failing.index)};
    Write(file, RenderScenario(sp, rf, origin));
    int tries = 0, failed = 0;
    const bool fails = ConfirmKOfN(
        [&] {
          const int t = tries++;
          if (t == 0 && first_known_failed) {
            ++failed;
            return true;
          }
          const Judged j =
              RunFile(file, dir / ("cand-" + std::to_string(c)) / ("try-" + std::to_string(t)));
          ++s.runs;
          const bool f = j.Fails(s.invariant);
          if (f) ++failed;
          return f;
        },
        rec_.confirm_k, rec_.confirm_n, &tries);
    tallies[key(sp, faults)] = {failed, tries};
    return fails;
  };
  failing_seed_ = Generate(space_, rec_.seed, failing.index).scenario_seed;
  s.confirmed = confirm(space_, failing.faults, true);
  s.confirm_runs = s.runs;
  s.result.minimal = failing.faults;
  if (s.confirmed && o_.shrink && !OutOfBudget() && !interrupted_) {
    ShrinkLimits limits;
    limits.earliest_ns = space_.start_ns.lo;
    limits.max_candidates = o_.max_candidates;
    s.result = Shrink(
        failing.faults,
        [&](const std::vector<GenFault>& faults) {
          if (OutOfBudget() || interrupted_) return CandidateVerdict::kOutOfBudget;
          return confirm(space_, faults, false) ? CandidateVerdict::kFails
                                                : CandidateVerdict::kPasses;
        },
        [&](const std::vector<GenFault>& faults) { return FitsSpace(space_, faults); }, limits);
  }
  // Then the topology and the message, with the faults as shrunk.
  FaultSpace minimal_space = space_;
  if (s.confirmed && o_.shrink && o_.max_topology_candidates > 0 && !OutOfBudget() &&
      !interrupted_) {
    s.topology = ShrinkTopology(
        ShapeOf(space_), s.result.minimal,
        [&](const TopologyShape& shape) {
          if (OutOfBudget() || interrupted_) return CandidateVerdict::kOutOfBudget;
          return confirm(SpaceWith(space_, shape), s.result.minimal, false)
                     ? CandidateVerdict::kFails
                     : CandidateVerdict::kPasses;
        },
        o_.max_topology_candidates);
    minimal_space = SpaceWith(space_, s.topology->minimal);
  }
  const auto t = tallies[key(minimal_space, s.result.minimal)];
  s.minimal_failed = t.first;
  s.minimal_runs = t.second;
  if (!s.confirmed) return;  // flaky: no minimal file; the campaign goes on
  RunFaults rf{failing_seed_, s.result.minimal};
  RunOrigin origin{
      rec_.seed, failing.index,
      "minimal form of run " + std::to_string(failing.index) + " (" + s.invariant + ")"};
  s.minimal_file = (out_ / "minimal.yaml").string();
  Write(s.minimal_file,
        Header(s.result.minimal, t.first, t.second) + RenderScenario(minimal_space, rf, origin));
}

int Campaign::Run() {
  rec_.space_file = space_.file;
  rec_.space_sha256 = space_.sha256;
  rec_.space_name = space_.base.name;
  rec_.ccl = CclNameString(o_.ccl.value_or(space_.base.ccl));
  rec_.seed = o_.seed;
  rec_.confirm_k = o_.confirm_k;
  rec_.confirm_n = o_.confirm_n;
  const InvariantSettings& inv = space_.invariants;
  if (inv.exact_results) rec_.invariants_on.push_back("exact_results");
  if (inv.no_silent_hang) rec_.invariants_on.push_back("no_silent_hang");
  if (inv.liveness_after_heal) rec_.invariants_on.push_back("liveness_after_heal");
  if (inv.lossless) rec_.invariants_on.push_back("lossless");
  if (inv.ccl_sequence) rec_.invariants_on.push_back("ccl_sequence");
  if (inv.nothing_left_behind) rec_.invariants_on.push_back("nothing_left_behind");
  std::error_code ec;
  fs::create_directories(out_ / "runs", ec);
  if (ec) {
    FL_ERROR("explore", "cannot create %s: %s", out_.c_str(), ec.message().c_str());
    return kBadInput;
  }
  if (o_.replay) return RunReplay(*o_.replay);
  if (o_.sweep) {
    SweepSpec sweep;
    if (auto err = ParseSweep(*o_.sweep, space_, &sweep)) {
      std::fprintf(stderr, "faultline explore: %s\n", err->c_str());
      return kBadInput;
    }
    return RunSweep(sweep);
  }
  int code = kOk;
  rec_.stop_reason = "runs";
  for (int64_t index = 0;; ++index) {
    if (o_.runs && index >= *o_.runs) break;
    if (OutOfBudget()) {
      rec_.stop_reason = "budget";
      break;
    }
    const RunFaults run = Generate(space_, o_.seed, index);
    const fs::path file = out_ / "runs" / ("run-" + std::to_string(index) + ".yaml");
    if (!Write(file, RenderScenario(space_, run, {o_.seed, index, ""}))) {
      code = kHarness;
      rec_.stop_reason = "harness error";
      break;
    }
    const RunRecord r = RunOne(file, index, run);
    if (!r.error.empty()) {
      FL_ERROR("explore", "run %lld: %s", static_cast<long long>(index), r.error.c_str());
      code = kHarness;
      rec_.stop_reason = "harness error";
      break;
    }
    const std::string v = r.Violation();
    std::printf("faultline explore: run %lld %s: %s\n", static_cast<long long>(index),
                r.outcome.c_str(),
                v.empty() ? "every invariant holds" : ("VIOLATION " + v).c_str());
    if (interrupted_) {
      rec_.stop_reason = "interrupted";
      code = kHarness;
      break;
    }
    if (!v.empty()) {
      ShrinkViolation(r);
      if (rec_.shrink->confirmed) {
        rec_.stop_reason = "violation";
        code = kViolation;
        break;
      }
      // Failed fewer than k of n times: noted as unconfirmed, not a violation.
      std::printf(
          "faultline explore: run %lld: %s failed %lld of %lld run(s), fewer than %d: "
          "unconfirmed, going on\n",
          static_cast<long long>(index), v.c_str(),
          static_cast<long long>(rec_.shrink->minimal_failed),
          static_cast<long long>(rec_.shrink->minimal_runs), o_.confirm_k);
      rec_.unconfirmed.push_back(std::move(*rec_.shrink));
      rec_.shrink.reset();
      if (interrupted_) {
        rec_.stop_reason = "interrupted";
        code = kHarness;
        break;
      }
    }
  }
  return Finish(code);
}

RunRecord Campaign::RunOne(const fs::path& file, int64_t index, const RunFaults& run) {
  const Judged j = RunFile(file, out_ / "runs" / ("run-" + std::to_string(index)));
  RunRecord r;
  r.index = index;
  r.file = file.string();
  r.dir = (out_ / "runs" / ("run-" + std::to_string(index))).string();
  r.outcome = j.outcome;
  r.exit_code = j.code;
  r.seconds = j.seconds;
  r.faults = run.faults;
  r.invariants = j.invariants;
  r.error = j.error;
  r.stall_ms = j.stall_ms;
  if (rec_.version.empty() && !j.versions.is_null()) rec_.version = j.versions.dump();
  rec_.runs.push_back(r);
  return r;
}

int Campaign::RunSweep(const SweepSpec& sweep) {
  rec_.sweep = sweep;
  rec_.stop_reason = "runs";
  const int64_t per_value = o_.runs.value_or(1);
  int code = kOk;
  int64_t index = 0;
  for (double value : SweepValues(sweep)) {
    const FaultSpace at = SpaceAt(space_, sweep, value);
    for (int64_t rep = 0; rep < per_value; ++rep, ++index) {
      if (OutOfBudget()) {
        rec_.stop_reason = "budget";
        return Finish(code);
      }
      const RunFaults run = Generate(at, o_.seed, rep);
      const fs::path file = out_ / "runs" / ("run-" + std::to_string(index) + ".yaml");
      char note[96];
      std::snprintf(note, sizeof note, "sweep of %s at %g, run %lld", sweep.Label().c_str(), value,
                    static_cast<long long>(rep));
      if (!Write(file, RenderScenario(at, run, {o_.seed, rep, note}))) {
        rec_.stop_reason = "harness error";
        return Finish(kHarness);
      }
      RunOne(file, index, run);
      RunRecord& last = rec_.runs.back();
      last.sweep_value = value;
      std::printf(
          "faultline explore: sweep %s = %g run %lld: %s, stall %s ms%s\n", sweep.Label().c_str(),
          value, static_cast<long long>(rep), last.outcome.c_str(),
          last.stall_ms ? std::to_string(static_cast<int64_t>(*last.stall_ms)).c_str() : "-",
          last.Violation().empty() ? "" : (", VIOLATION " + last.Violation()).c_str());
      if (!last.error.empty()) {
        FL_ERROR("explore", "run %lld: %s", static_cast<long long>(index), last.error.c_str());
        rec_.stop_reason = "harness error";
        return Finish(kHarness);
      }
      if (!last.Violation().empty()) code = kViolation;
      if (interrupted_) {
        rec_.stop_reason = "interrupted";
        return Finish(kHarness);
      }
    }
  }
  return Finish(code);
}

int Campaign::RunReplay(const std::string& file) {
  rec_.stop_reason = "runs";
  int code = kOk;
  int failed = 0;
  const int64_t n = o_.runs.value_or(5);
  for (int64_t i = 0; i < n; ++i) {
    if (OutOfBudget()) {
      rec_.stop_reason = "budget";
      break;
    }
    const RunRecord& r = RunOne(file, i, RunFaults{});
    const std::string v = r.Violation();
    std::printf("faultline explore: replay %lld of %s: %s\n", static_cast<long long>(i),
                file.c_str(), v.empty() ? "every invariant holds" : ("VIOLATION " + v).c_str());
    if (!r.error.empty()) {
      rec_.stop_reason = "harness error";
      return Finish(kHarness);
    }
    if (!v.empty()) {
      ++failed;
      code = kViolation;
    }
    if (interrupted_) {
      rec_.stop_reason = "interrupted";
      return Finish(kHarness);
    }
  }
  std::printf("faultline explore: %s violated an invariant in %d of %zu run(s)\n", file.c_str(),
              failed, rec_.runs.size());
  return Finish(code);
}

int Campaign::Finish(int code) {
  if (interrupted_ && code == kOk) code = kHarness;
  rec_.exit_code = code;
  rec_.seconds = Since(t0_);
  bool ok = Write(out_ / "campaign.json", CampaignJson(rec_).dump(2) + "\n");
  ok = Write(out_ / "campaign.html", CampaignHtml(rec_)) && ok;
  ok = Write(out_ / "junit.xml", CampaignJunit(rec_)) && ok;
  if (!ok) return kHarness;
  std::printf("faultline explore: %zu run(s), %s; %s\n", rec_.runs.size(), rec_.stop_reason.c_str(),
              (out_ / "campaign.html").c_str());
  if (rec_.shrink) {
    std::printf("faultline explore: %s violated in run %lld, shrunk to %zu fault(s): %s\n",
                rec_.shrink->invariant.c_str(), static_cast<long long>(rec_.shrink->from_index),
                rec_.shrink->result.minimal.size(), rec_.shrink->minimal_file.c_str());
  }
  return code;
}

}  // namespace

std::optional<std::string> ParseConfirm(const std::string& text, int* k, int* n) {
  int a = 0, b = 0;
  char extra = 0;
  if (std::sscanf(text.c_str(), "%d/%d%c", &a, &b, &extra) != 2 || a < 1 || b < a || b > 20) {
    return "--confirm must be K/N with 1 <= K <= N <= 20, got '" + text + "'";
  }
  *k = a;
  *n = b;
  return std::nullopt;
}

int RunCampaign(const CampaignOptions& options) {
  SpaceOutcome parsed = ParseFaultSpaceFile(options.space_path);
  if (!parsed.ok()) {
    for (const auto& d : parsed.diagnostics) std::fprintf(stderr, "%s\n", d.ToString().c_str());
    return kBadInput;
  }
  if (options.out_dir.empty()) {
    std::fprintf(stderr, "faultline explore: --out DIR is required\n");
    return kBadInput;
  }
  if (options.sweep) {
    SweepSpec sweep;
    if (auto err = ParseSweep(*options.sweep, *parsed.space, &sweep)) {
      std::fprintf(stderr, "faultline explore: %s\n", err->c_str());
      return kBadInput;
    }
  }
  if (options.ccl) parsed.space->base.ccl = *options.ccl;
  const CclName ccl = parsed.space->base.ccl;
  const auto* traits = workload::adapters::FindCclTraits(CclNameString(ccl));
  if (!traits || !traits->built_here) {
    std::fprintf(stderr, "faultline explore: ccl %s is not built here%s%s\n", CclNameString(ccl),
                 traits && !traits->how_to_build.empty() ? ": " : "",
                 traits ? std::string(traits->how_to_build).c_str() : "");
    return kBadInput;
  }
  Campaign c(options, std::move(*parsed.space));
  return c.Run();
}

}  // namespace faultline::runner::explore
