#include "runner/explore/invariants.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "injector/journal.h"
#include "runner/core/fault_kind.h"
#include "runner/core/worker_log.h"
#include "workload/adapters/ccl_traits.h"

namespace faultline::runner::explore {
namespace fs = std::filesystem;
namespace {

std::optional<std::string> Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

InvariantResult Fail(const std::string& name, std::string detail) {
  return {name, Verdict::kFail, std::move(detail)};
}
InvariantResult Pass(const std::string& name, std::string detail = "") {
  return {name, Verdict::kPass, std::move(detail)};
}
InvariantResult NotApplicable(const std::string& name, std::string detail) {
  return {name, Verdict::kNotApplicable, std::move(detail)};
}

// The ranks a rank_kill fault of the scenario ended (global ranks).
std::vector<int> KilledRanks(const RunView& run) {
  std::vector<int> out;
  if (!run.scenario) return out;
  for (const auto& f : run.scenario->faults) {
    if (f.kind != "rank_kill") continue;
    if (auto g = f.target.GlobalRank(run.scenario->topology)) out.push_back(*g);
  }
  return out;
}

// A link-level fault of the report (its target's host, rank's port and rail, when it held).
struct LinkHold {
  int host = 0;
  int rank = -1;  // the rank whose own port it hit (nics: per_rank); -1: the host's shared port
  int rail = 0;
  double from_s = 0;
  double to_s = 0;  // +inf: never healed
};

bool IsLinkKind(const std::string& type) {
  return type == "link_down" || type == "link_flap" || type == "blackhole" || type == "port_drop";
}

std::vector<LinkHold> LinkHolds(const nlohmann::json& faults) {
  std::vector<LinkHold> out;
  for (const auto& f : faults) {
    if (!IsLinkKind(f.value("type", ""))) continue;
    const auto& t = f.value("target", nlohmann::json::object());
    const auto& a = f.value("applied_s", nlohmann::json());
    if (!t.is_object() || !a.is_number() || !t.value("host", nlohmann::json()).is_number() ||
        !t.value("rail", nlohmann::json()).is_number()) {
      continue;
    }
    const auto& r = f.value("reverted_s", nlohmann::json());
    const auto& k = t.value("rank", nlohmann::json());
    out.push_back({t["host"].get<int>(), k.is_number() ? k.get<int>() : -1, t["rail"].get<int>(),
                   a.get<double>(),
                   r.is_number() ? r.get<double>() : std::numeric_limits<double>::infinity()});
  }
  return out;
}

// Whether, at time t, some pair of ranks has no path. Shared NICs: some pair of hosts has no
// rail free of link faults on both its ends (ranks of one host reach each other inside it).
// One NIC per rank (nics: per_rank): a pair of ranks has a path when a rail is up on both
// their ports; with a CCL that relays within a host (`relays`), also when one of the two has
// lost every port and a neighbour on its host has a rail up that the other has up too (the
// neighbour forwards; two ranks of one host reach each other over the host itself). A rank
// that keeps a port only on a rail the other lacks has no path: the relay serves a rank
// without ports, not a pair without a common rail.
bool NoPathAt(const std::vector<LinkHold>& holds, const Topology& topo, double t, bool relays) {
  const int per_host = topo.per_rank_nics() ? topo.ranks_per_host : 1;
  const int n = topo.hosts * per_host;
  std::vector<std::vector<bool>> up(n, std::vector<bool>(topo.rails, true));
  for (const auto& h : holds) {
    if (!(h.from_s <= t && t < h.to_s) || h.host < 0 || h.host >= topo.hosts || h.rail < 0 ||
        h.rail >= topo.rails || h.rank >= per_host) {
      continue;
    }
    for (int k = 0; k < per_host; ++k) {
      if (h.rank < 0 || h.rank == k) up[h.host * per_host + k][h.rail] = false;
    }
  }
  auto host_of = [&](int g) { return g / per_host; };
  auto common = [&](int a, int b) {
    for (int r = 0; r < topo.rails; ++r) {
      if (up[a][r] && up[b][r]) return true;
    }
    return false;
  };
  auto lost = [&](int g) {
    for (int r = 0; r < topo.rails; ++r) {
      if (up[g][r]) return false;
    }
    return true;
  };
  // `a` has no port; a neighbour of it forwards to `b`.
  auto relayed = [&](int a, int b) {
    if (!relays || !lost(a) || lost(b)) return false;
    if (host_of(a) == host_of(b)) return true;
    for (int m = host_of(a) * per_host; m < (host_of(a) + 1) * per_host; ++m) {
      if (m != a && common(m, b)) return true;
    }
    return false;
  };
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      if (per_host == 1 && host_of(a) == host_of(b)) continue;
      if (!common(a, b) && !relayed(a, b) && !relayed(b, a)) return true;
    }
  }
  return false;
}

// The longest stretch of [a, b] during which every pair of ranks had a path (the state only
// changes at fault boundaries, so it is sampled at each one inside and at a); sets *no_path
// when some time in [a, b] had none. A collective that waits out a time without a path and then
// still does not complete once the path is back stalls from that moment on.
double LongestWithPath(const std::vector<LinkHold>& holds, const Topology& topo, double a, double b,
                       bool relays, bool* no_path, double* start) {
  std::vector<double> ts = {a};
  for (const auto& h : holds) {
    if (h.from_s > a && h.from_s < b) ts.push_back(h.from_s);
    if (h.to_s > a && h.to_s < b) ts.push_back(h.to_s);
  }
  std::sort(ts.begin(), ts.end());
  ts.push_back(b);
  double longest = 0, from = -1;
  for (size_t i = 0; i + 1 < ts.size(); ++i) {
    if (NoPathAt(holds, topo, ts[i], relays)) {
      *no_path = true;
      from = -1;
      continue;
    }
    if (from < 0) from = ts[i];
    if (ts[i + 1] - from > longest) {
      longest = ts[i + 1] - from;
      *start = from;
    }
  }
  return longest;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The stall part of liveness_after_heal; empty when it holds or does not apply, else why not.
// `first_s`..`heal_s`: the first application and the last heal.
std::string StallViolation(const RunView& run, const InvariantSettings& s, bool relays,
                           double first_s, double heal_s, std::string* note) {
  if (s.stall_x <= 0) return "";
  if (!run.scenario) {
    *note = "; stall bound not checked: no scenario.yaml";
    return "";
  }
  std::vector<double> before;
  std::vector<double> ends;
  for (const auto& r : run.series) {
    if (r.end_s < first_s) before.push_back(r.duration_ms);
    ends.push_back(r.end_s);
  }
  if (before.empty()) return "no collective completed before the first fault (no baseline time)";
  std::sort(ends.begin(), ends.end());
  const double base_ms = Median(before);
  const double bound_s = static_cast<double>(s.stall_plus_ns) / 1e9 + s.stall_x * base_ms / 1e3;
  const auto holds = LinkHolds(run.report->value("faults", nlohmann::json::array()));
  double worst = 0, worst_from = 0;
  size_t skipped = 0;
  double prev = first_s;
  for (size_t i = 0; i <= ends.size(); ++i) {
    const double next = i < ends.size() ? ends[i] : heal_s;
    if (next <= first_s) continue;
    const double a = std::max(prev, first_s);
    const double b = std::min(next, heal_s);
    prev = next;
    if (b <= a) {
      if (next >= heal_s) break;
      continue;
    }
    bool no_path = false;
    double from = a;
    const double with_path =
        LongestWithPath(holds, run.scenario->topology, a, b, relays, &no_path, &from);
    if (no_path) ++skipped;
    if (with_path > worst) {
      worst = with_path;
      worst_from = from;
    }
    if (next >= heal_s) break;
  }
  *note = "; longest stall with a path " + Fmt("%.0f", worst * 1e3) + " ms (bound " +
          Fmt("%.0f", bound_s * 1e3) + " ms = " + Fmt("%.0f", s.stall_plus_ns / 1e6) + " ms + " +
          Fmt("%g", s.stall_x) + " x " + Fmt("%.2f", base_ms) + " ms)";
  if (skipped > 0) {
    *note += ", " + std::to_string(skipped) + " interval(s) with a time without a path (counted " +
             "from when the path was back)";
  }
  if (worst > bound_s) {
    return "no collective completed for " + Fmt("%.0f", worst * 1e3) + " ms from " +
           Fmt("%.3f", worst_from) + " s while every pair of ranks had a path, past " +
           "the stall bound of " + Fmt("%.0f", bound_s * 1e3) + " ms (" +
           Fmt("%.0f", s.stall_plus_ns / 1e6) + " ms + " + Fmt("%g", s.stall_x) +
           " x the baseline collective time " + Fmt("%.2f", base_ms) + " ms)";
  }
  return "";
}

// A counter of a rank's stats line; nullopt when absent.
std::optional<uint64_t> Counter(const RankView& r, const std::string& name) {
  if (!r.stats) return std::nullopt;
  auto it = r.stats->find(name);
  if (it == r.stats->end()) return std::nullopt;
  return it->second;
}

// Why the chunk counters of a run cannot be judged; empty when they can.
std::string CountersUnusable(const RunView& run, bool* not_applicable) {
  *not_applicable = false;
  if (!run.report) return run.report_error;
  const std::string outcome = run.report->value("outcome", "");
  if (outcome != "survived") {
    *not_applicable = true;
    return "the run's outcome is " + outcome + " (chunks in flight at an abort are dropped)";
  }
  if (run.ranks.empty()) return "the run has no rank logs";
  bool any = false;
  for (const auto& r : run.ranks) {
    if (Counter(r, "chunks_numbered_to_rank" + std::to_string(r.rank == 0 ? 1 : 0))) any = true;
  }
  if (!any) {
    *not_applicable = true;
    return "the ccl exports no per-peer chunk counters";
  }
  for (const auto& r : run.ranks) {
    if (!r.error.empty()) return "rank " + std::to_string(r.rank) + ": " + r.error;
    if (!r.end || r.end->exit != RankExit::kCompleted) {
      *not_applicable = true;
      return "rank " + std::to_string(r.rank) + " did not complete";
    }
    if (!r.stats) return "rank " + std::to_string(r.rank) + " completed but wrote no stats line";
  }
  return "";
}

}  // namespace

const char* VerdictString(Verdict v) {
  switch (v) {
    case Verdict::kPass:
      return "pass";
    case Verdict::kFail:
      return "fail";
    case Verdict::kNotApplicable:
      return "n/a";
  }
  return "?";
}

nlohmann::json InvariantResult::ToJson() const {
  return {{"name", name}, {"verdict", VerdictString(verdict)}, {"detail", detail}};
}

RunView LoadRunView(const std::string& dir) {
  RunView v;
  v.dir = dir;
  const fs::path d(dir);
  if (auto t = Slurp(d / "report.json")) {
    try {
      v.report = nlohmann::json::parse(*t);
    } catch (const nlohmann::json::exception& e) {
      v.report_error = std::string("report.json is not JSON: ") + e.what();
    }
  } else {
    v.report_error = "the run wrote no report.json";
  }
  if (fs::exists(d / "scenario.yaml")) {
    ParseOutcome p = ParseScenarioFile((d / "scenario.yaml").string());
    if (p.ok()) v.scenario = std::move(*p.scenario);
  }
  if (auto t = Slurp(d / "timeseries.csv")) {
    auto series = reports::ParseTimeseriesCsv(*t);
    if (series.ok()) {
      v.series = std::move(*series);
    } else {
      v.series_error = series.status().message();
    }
  } else {
    v.series_error = "the run wrote no timeseries.csv";
  }
  // ranks/rank<N>.jsonl: the first incarnation of each rank (restarted ones are rank<N>.i<k>).
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(d / "ranks", ec)) {
    const std::string name = e.path().filename().string();
    const std::string digits = name.size() > 10 ? name.substr(4, name.size() - 10) : "";
    if (name.rfind("rank", 0) != 0 || name.size() <= 10 ||
        name.compare(name.size() - 6, 6, ".jsonl") != 0 || digits.empty() ||
        !std::all_of(digits.begin(), digits.end(), ::isdigit)) {
      continue;
    }
    const int rank = std::stoi(digits);
    RankView r;
    r.rank = rank;
    r.file = e.path().string();
    auto log = LoadWorkerLog(r.file);
    if (!log.ok()) {
      r.error = log.status().ToString();
    } else {
      r.end = log->end;
      r.ops = log->ops;
      r.stats = log->stats;
    }
    v.ranks.push_back(std::move(r));
  }
  std::sort(v.ranks.begin(), v.ranks.end(),
            [](const RankView& a, const RankView& b) { return a.rank < b.rank; });
  return v;
}

HostState ReadHostState() {
  HostState h;
  h.pid = static_cast<int>(getpid());
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/run/netns", ec)) {
    h.netns.push_back(e.path().filename().string());
  }
  const char* jd = std::getenv("FAULTLINE_JOURNAL_DIR");
  const fs::path journal = jd && *jd ? fs::path(jd) : fs::path(Journal::DefaultDir());
  for (auto it = fs::recursive_directory_iterator(journal, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file() && it->path().extension() == ".json") {
      if (auto t = Slurp(it->path())) h.journal_entries.push_back(*t);
    }
  }
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string pid = e.path().filename().string();
    if (pid.empty() || !std::all_of(pid.begin(), pid.end(), ::isdigit)) continue;
    auto raw = Slurp(e.path() / "cmdline");
    if (!raw || raw->empty()) continue;
    std::string joined;
    for (char c : *raw) joined.push_back(c == '\0' ? ' ' : c);
    const std::string argv0 = raw->substr(0, raw->find('\0'));
    if (argv0.size() >= 16 && argv0.compare(argv0.size() - 16, 16, "faultline-worker") == 0) {
      h.process_cmdlines.push_back(joined);
    }
  }
  for (const auto& e : fs::directory_iterator("/sys/class/net", ec)) {
    h.root_links.push_back(e.path().filename().string());
  }
  if (FILE* p = popen("nft list tables 2>/dev/null", "r")) {
    char line[512];
    while (std::fgets(line, sizeof line, p)) {
      std::string s(line);
      while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
      if (!s.empty()) h.nft_tables.push_back(s);
    }
    pclose(p);
  }
  return h;
}

InvariantResult CheckExactResults(const RunView& run) {
  const std::string name = "exact_results";
  if (!run.report) return Fail(name, run.report_error);
  const auto& c = run.report->value("correctness", nlohmann::json());
  if (!c.is_object()) return Fail(name, "report.json has no correctness");
  if (!c.value("checked", false)) {
    return Fail(name, "results were not checked (workload.check is off or no collective was checked)");
  }
  const auto& wrong = c.value("wrong", nlohmann::json());
  if (!wrong.is_number_integer()) return Fail(name, "correctness.wrong is not a number");
  if (wrong.get<int64_t>() != 0) {
    return Fail(name, std::to_string(wrong.get<int64_t>()) + " collective(s) returned a wrong result");
  }
  return Pass(name);
}

InvariantResult CheckNoSilentHang(const RunView& run, const InvariantSettings& s) {
  const std::string name = "no_silent_hang";
  if (!run.report) return Fail(name, run.report_error);
  const std::string outcome = run.report->value("outcome", "");
  if (outcome == "hung") return Fail(name, "the run's outcome is hung");
  if (outcome == "crashed") {
    return Fail(name, "the run's outcome is crashed: a rank died, or the error did not reach "
                      "every rank");
  }
  if (run.ranks.empty()) return Fail(name, "the run has no rank logs (ranks/rank<N>.jsonl)");
  const std::vector<int> killed = KilledRanks(run);
  const double bound_s = static_cast<double>(s.abort_within_ns) / 1e9;
  for (const auto& r : run.ranks) {
    const bool was_killed = std::find(killed.begin(), killed.end(), r.rank) != killed.end();
    if (!r.error.empty()) return Fail(name, "rank " + std::to_string(r.rank) + ": " + r.error);
    if (!r.end && !was_killed) {
      return Fail(name, "rank " + std::to_string(r.rank) + " never wrote its end (it neither "
                        "completed nor reported an error)");
    }
    if (r.end && r.end->watchdog) {
      return Fail(name, "rank " + std::to_string(r.rank) +
                            ": its watchdog ended a library call that never returned");
    }
    for (const auto& op : r.ops) {
      const double took_s = static_cast<double>(op.end_ns - op.start_ns) / 1e9;
      if (took_s > bound_s) {
        return Fail(name, "rank " + std::to_string(r.rank) + " collective " +
                              std::to_string(op.index) + " took " + Fmt("%.3f", took_s) +
                              " s before it " + (op.ok ? "returned" : "failed") +
                              ", past the abort bound of " + Fmt("%.3f", bound_s) + " s");
      }
    }
  }
  return Pass(name, "outcome " + outcome);
}

InvariantResult CheckLivenessAfterHeal(const RunView& run, const InvariantSettings& s) {
  const std::string name = "liveness_after_heal";
  if (!run.report) return Fail(name, run.report_error);
  const std::string ccl = run.report->value("ccl", "");
  const auto* traits = workload::adapters::FindCclTraits(ccl);
  if (!traits || !traits->fails_over) {
    return NotApplicable(name, "ccl " + ccl + " does not claim failover (CCL traits)");
  }
  const auto& faults = run.report->value("faults", nlohmann::json::array());
  if (!faults.is_array() || faults.empty()) return NotApplicable(name, "the run has no fault");
  // The last heal: the revert of every fault that holds, the act of a one-shot.
  double heal_s = 0;
  for (const auto& f : faults) {
    const std::string type = f.value("type", "");
    const std::string id = f.value("id", "");
    const auto* d = faults::FindFaultDescriptor(type);
    bool permanent = !d || d->hold == faults::Hold::kRestOfRun || d->hold == faults::Hold::kOnceForGood;
    if (run.scenario) {
      for (const auto& spec : run.scenario->faults) {
        if (spec.id == id && spec.Permanent()) permanent = true;
      }
    }
    if (permanent) return NotApplicable(name, "fault " + id + " (" + type + ") never heals");
    const bool once = d->hold == faults::Hold::kOnce;
    const auto& t = f.value(once ? "applied_s" : "reverted_s", nlohmann::json());
    if (!t.is_number()) {
      return Fail(name, "fault " + id + " has no " + (once ? "applied_s" : "reverted_s"));
    }
    heal_s = std::max(heal_s, t.get<double>());
  }
  double first_s = std::numeric_limits<double>::infinity();
  for (const auto& f : faults) {
    const auto& a = f.value("applied_s", nlohmann::json());
    if (a.is_number()) first_s = std::min(first_s, a.get<double>());
  }
  std::string stall_note;
  if (!run.series_error.empty()) return Fail(name, run.series_error);
  if (std::string v =
          StallViolation(run, s, traits->relays_within_host, first_s, heal_s, &stall_note);
      !v.empty()) {
    return Fail(name, v);
  }
  const auto& metrics = run.report->value("metrics", nlohmann::json::object());
  const auto& base = metrics.is_object() ? metrics.value("baseline_busbw_gbps", nlohmann::json())
                                         : nlohmann::json();
  if (!base.is_number() || base.get<double>() <= 0) {
    return Fail(name, "no baseline busbw: no collective completed between the warm-up and the "
                      "first fault");
  }
  if (!run.series_error.empty()) return Fail(name, run.series_error);
  const double target = base.get<double>() * s.liveness_pct / 100.0;
  const double window_s = static_cast<double>(kLivenessWindowNs) / 1e9;
  const double deadline_s = heal_s + static_cast<double>(s.liveness_within_ns) / 1e9;
  double best = 0;
  const auto& rows = run.series;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].start_s < heal_s) continue;
    double bits = 0, secs = 0;
    for (size_t j = i; j < rows.size(); ++j) {
      if (rows[j].end_s > deadline_s) break;
      bits += rows[j].busbw_gbps * rows[j].duration_ms;
      secs += rows[j].duration_ms;
      if (rows[j].end_s - rows[i].start_s >= window_s) {
        const double rate = secs > 0 ? bits / secs : 0;
        best = std::max(best, rate);
        if (rate >= target) {
          return Pass(name, "back to " + Fmt("%.3f", rate) + " Gbps (" +
                                Fmt("%.0f", 100 * rate / base.get<double>()) + " % of baseline) " +
                                Fmt("%.3f", rows[i].start_s - heal_s) + " s after the last heal" +
                                stall_note);
        }
        break;
      }
    }
  }
  return Fail(name, "busbw did not reach " + Fmt("%.0f", s.liveness_pct) + " % of the baseline (" +
                        Fmt("%.3f", target) + " Gbps) over " + Fmt("%.0f", window_s * 1000) +
                        " ms within " + Fmt("%.3f", deadline_s - heal_s) +
                        " s of the last heal at " + Fmt("%.3f", heal_s) + " s; best " +
                        Fmt("%.3f", best) + " Gbps");
}

InvariantResult CheckLossless(const RunView& run) {
  const std::string name = "lossless";
  bool na = false;
  if (std::string why = CountersUnusable(run, &na); !why.empty()) {
    return na ? NotApplicable(name, why) : Fail(name, why);
  }
  uint64_t total = 0;
  for (const auto& s : run.ranks) {
    for (const auto& r : run.ranks) {
      if (s.rank == r.rank) continue;
      const std::string sn = std::to_string(s.rank), rn = std::to_string(r.rank);
      const auto numbered = Counter(s, "chunks_numbered_to_rank" + rn);
      const auto accepted = Counter(r, "chunks_accepted_from_rank" + sn);
      if (!numbered || !accepted) {
        return Fail(name, "rank " + sn + " -> rank " + rn + ": a chunk counter is missing");
      }
      if (*accepted > *numbered) {
        return Fail(name, "rank " + rn + " accepted " + std::to_string(*accepted) +
                              " chunks from rank " + sn + ", which numbered " +
                              std::to_string(*numbered) + ": " +
                              std::to_string(*accepted - *numbered) + " taken twice");
      }
      if (*accepted < *numbered) {
        return Fail(name, "rank " + rn + " accepted " + std::to_string(*accepted) +
                              " chunks from rank " + sn + ", which numbered " +
                              std::to_string(*numbered) + ": " +
                              std::to_string(*numbered - *accepted) + " lost");
      }
      total += *numbered;
    }
  }
  return Pass(name, std::to_string(total) + " chunks, each accepted exactly once");
}

InvariantResult CheckCclSequence(const RunView& run) {
  const std::string name = "ccl_sequence";
  bool na = false;
  if (std::string why = CountersUnusable(run, &na); !why.empty()) {
    return na ? NotApplicable(name, why) : Fail(name, why);
  }
  for (const auto& s : run.ranks) {
    for (const auto& r : run.ranks) {
      if (s.rank == r.rank) continue;
      const std::string sn = std::to_string(s.rank), rn = std::to_string(r.rank);
      const auto numbered = Counter(s, "chunks_numbered_to_rank" + rn);
      const auto acked = Counter(s, "tx_acknowledged_to_rank" + rn);
      const auto accepted = Counter(r, "chunks_accepted_from_rank" + sn);
      const auto cum = Counter(r, "rx_cumulative_from_rank" + sn);
      if (!numbered || !acked || !accepted || !cum) {
        return Fail(name, "rank " + sn + " -> rank " + rn + ": a sequence counter is missing");
      }
      if (*cum != *accepted) {
        return Fail(name, "rank " + rn + "'s cumulative acknowledgement of rank " + sn + " is " +
                              std::to_string(*cum) + " but it accepted " +
                              std::to_string(*accepted) + " chunks from it");
      }
      if (*acked > *numbered || *acked > *cum) {
        return Fail(name, "rank " + sn + " holds " + std::to_string(*acked) + " chunks to rank " +
                              rn + " acknowledged, past the " + std::to_string(*numbered) +
                              " it numbered or the " + std::to_string(*cum) + " rank " + rn +
                              " acknowledged");
      }
    }
  }
  return Pass(name, "every cumulative acknowledgement matches what was accepted");
}

InvariantResult CheckNothingLeftBehind(const RunView& run, const HostState& host) {
  const std::string name = "nothing_left_behind";
  if (!run.report) return Fail(name, run.report_error);
  const auto& env = run.report->value("environment", nlohmann::json::object());
  const std::string id = env.is_object() ? env.value("run_id", "") : "";
  if (id.empty()) return Fail(name, "report.json names no environment.run_id");
  std::vector<std::string> left;
  for (const auto& n : host.netns) {
    if (n.rfind("fl-" + id + "-", 0) == 0) left.push_back("namespace " + n);
  }
  for (const auto& j : host.journal_entries) {
    if (j.find(id) != std::string::npos) left.push_back("journal entry " + j.substr(0, 120));
  }
  const std::string dir = fs::absolute(run.dir).lexically_normal().string();
  for (const auto& p : host.process_cmdlines) {
    if (p.find(dir + "/") != std::string::npos || p.find(id) != std::string::npos) {
      left.push_back("process " + p.substr(0, 120));
    }
  }
  for (const auto& l : host.root_links) {
    if (l.find(id) != std::string::npos) left.push_back("link " + l);
  }
  const std::string own = "faultline_";
  const std::string pid = "_" + std::to_string(host.pid) + "_";
  for (const auto& t : host.nft_tables) {
    if (t.find(own) != std::string::npos && t.find(pid) != std::string::npos) {
      left.push_back("nft " + t);
    }
  }
  if (!left.empty()) {
    std::string d = "run " + id + " left " + std::to_string(left.size()) + " thing(s): ";
    for (size_t i = 0; i < left.size() && i < 5; ++i) d += (i ? "; " : "") + left[i];
    return Fail(name, d);
  }
  return Pass(name, "run " + id);
}

const std::vector<std::string>& InvariantNames() {
  static const std::vector<std::string> names = {"exact_results",       "no_silent_hang",
                                                 "liveness_after_heal", "lossless",
                                                 "ccl_sequence",        "nothing_left_behind"};
  return names;
}

std::vector<InvariantResult> CheckInvariants(const RunView& run, const InvariantSettings& s,
                                             const HostState* host) {
  std::vector<InvariantResult> out;
  if (s.exact_results) out.push_back(CheckExactResults(run));
  if (s.no_silent_hang) out.push_back(CheckNoSilentHang(run, s));
  if (s.liveness_after_heal) out.push_back(CheckLivenessAfterHeal(run, s));
  if (s.lossless) out.push_back(CheckLossless(run));
  if (s.ccl_sequence) out.push_back(CheckCclSequence(run));
  if (s.nothing_left_behind) {
    out.push_back(host ? CheckNothingLeftBehind(run, *host)
                       : Fail("nothing_left_behind", "the machine's state was not read"));
  }
  return out;
}

}  // namespace faultline::runner::explore
