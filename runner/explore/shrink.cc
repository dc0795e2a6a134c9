#include "runner/explore/shrink.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

namespace faultline::runner::explore {
namespace {

constexpr int64_t kMs = 1'000'000;

std::string Key(const std::vector<GenFault>& fs) {
  std::string k;
  for (const auto& f : fs) k += Describe(f) + ";";
  return k;
}

std::string Ids(const std::vector<GenFault>& fs) {
  std::string s;
  for (const auto& f : fs) s += (s.empty() ? "" : " ") + f.id;
  return s.empty() ? "(none)" : s;
}

class Shrinker final {
 public:
  Shrinker(const ShrinkPredicate& fails, const ShrinkFits& fits, const ShrinkLimits& limits)
      : fails_(fails), fits_(fits), limits_(limits) {}

  ShrinkResult Run(std::vector<GenFault> current) {
    current_ = std::move(current);
    if (!Try({}, "no fault at all")) DeltaDebug();
    bool changed = true;
    while (changed && !result_.out_of_budget) {
      changed = false;
      for (size_t i = 0; i < current_.size() && !result_.out_of_budget; ++i) {
        while (SimplifyOnce(i)) changed = true;
      }
    }
    result_.minimal = current_;
    return std::move(result_);
  }

 private:
  // Asks about `candidate` (unless it was asked before or does not fit); it becomes the
  // current run when it fails.
  bool Try(std::vector<GenFault> candidate, const std::string& action) {
    if (result_.out_of_budget) return false;
    std::sort(candidate.begin(), candidate.end(),
              [](const GenFault& a, const GenFault& b) { return a.at_ns < b.at_ns; });
    const std::string key = Key(candidate);
    if (auto it = seen_.find(key); it != seen_.end()) {
      if (it->second) current_ = candidate;
      return it->second;
    }
    if (!fits_(candidate)) return false;
    if (result_.asked >= limits_.max_candidates) {
      result_.out_of_budget = true;
      return false;
    }
    ++result_.asked;
    const CandidateVerdict v = fails_(candidate);
    if (v == CandidateVerdict::kOutOfBudget) {
      result_.out_of_budget = true;
      return false;
    }
    const bool failed = v == CandidateVerdict::kFails;
    seen_[key] = failed;
    result_.steps.push_back({action, candidate, failed, failed});
    if (failed) current_ = std::move(candidate);
    return failed;
  }

  void DeltaDebug() {
    size_t n = 2;
    while (current_.size() >= 2 && !result_.out_of_budget) {
      const std::vector<GenFault> c = current_;
      n = std::min(n, c.size());
      std::vector<std::vector<GenFault>> chunks(n);
      for (size_t i = 0; i < c.size(); ++i) chunks[i * n / c.size()].push_back(c[i]);
      bool reduced = false;
      for (const auto& chunk : chunks) {
        if (Try(chunk, "ddmin: keep " + Ids(chunk))) {
          n = 2;
          reduced = true;
          break;
        }
      }
      if (!reduced && n > 2) {
        for (size_t j = 0; j < n && !reduced; ++j) {
          std::vector<GenFault> rest;
          for (size_t i = 0; i < n; ++i) {
            if (i != j) rest.insert(rest.end(), chunks[i].begin(), chunks[i].end());
          }
          if (Try(rest, "ddmin: drop " + Ids(chunks[j]))) {
            n = std::max<size_t>(n - 1, 2);
            reduced = true;
          }
        }
      }
      if (!reduced) {
        if (n >= c.size()) break;
        n = std::min(n * 2, c.size());
      }
    }
    if (current_.size() == 1) return;
  }

  // The ways to simplify a fault. A way that once gave a passing (or unfit) candidate is not
  // tried again on that fault: shrinking assumes that a smaller change of the same kind would
  // pass too, which keeps the number of re-runs linear in the faults.
  enum Way { kLength, kEarlier, kHost, kRank, kRail, kSide };

  bool TryWay(size_t i, Way way, const GenFault& g, const std::string& action) {
    const auto key = std::make_pair(current_[i].id, static_cast<int>(way));
    if (stuck_.count(key) > 0) return false;
    std::vector<GenFault> c = current_;
    c[i] = g;
    if (Try(std::move(c), action)) return true;
    stuck_.insert(key);
    return false;
  }

  // One simplification of fault `i` that still fails; false when none did.
  bool SimplifyOnce(size_t i) {
    const GenFault f = current_[i];
    // Halve its length.
    if (f.type == "link_flap") {
      if (f.count > 1) {
        GenFault g = f;
        g.count = (f.count + 1) / 2;
        if (TryWay(i, kLength, g, f.id + ": halve the flap count to " + std::to_string(g.count))) {
          return true;
        }
      } else if (f.down_ns / 2 >= limits_.min_length_ns) {
        GenFault g = f;
        g.down_ns = f.down_ns / 2 / kMs * kMs;
        g.up_ns = std::max(limits_.min_length_ns, f.up_ns / 2 / kMs * kMs);
        if (TryWay(i, kLength, g, f.id + ": halve down and up")) return true;
      }
    } else if (f.for_ns > 0 && f.for_ns / 2 >= limits_.min_length_ns) {
      GenFault g = f;
      g.for_ns = f.for_ns / 2 / kMs * kMs;
      if (TryWay(i, kLength, g,
                 f.id + ": halve its length to " + std::to_string(g.for_ns / kMs) + "ms")) {
        return true;
      }
    }
    // Move it earlier.
    if (f.at_ns - limits_.earliest_ns >= limits_.min_length_ns) {
      GenFault g = f;
      g.at_ns = (limits_.earliest_ns + (f.at_ns - limits_.earliest_ns) / 2) / kMs * kMs;
      if (TryWay(i, kEarlier, g, f.id + ": move it to " + std::to_string(g.at_ns / kMs) + "ms")) {
        return true;
      }
    }
    // A simpler target.
    if (f.host != 0) {
      GenFault g = f;
      g.host = 0;
      if (f.type == "conn_corrupt" && f.peer_host == 0) g.peer_host = f.host;  // the same pair
      if (TryWay(i, kHost, g, f.id + ": host 0")) return true;
    }
    if (f.rank != 0) {
      GenFault g = f;
      g.rank = 0;
      if (TryWay(i, kRank, g, f.id + ": rank 0 of its host")) return true;
    }
    if (f.rail != 0) {
      GenFault g = f;
      g.rail = 0;
      if (TryWay(i, kRail, g, f.id + ": rail 0")) return true;
    }
    if (f.side != LinkSide::kHost && !f.OneShot()) {
      GenFault g = f;
      g.side = LinkSide::kHost;
      if (TryWay(i, kSide, g, f.id + ": host side")) return true;
    }
    return false;
  }

  const ShrinkPredicate& fails_;
  const ShrinkFits& fits_;
  const ShrinkLimits limits_;
  std::vector<GenFault> current_;
  std::map<std::string, bool> seen_;
  std::set<std::pair<std::string, int>> stuck_;  // (fault id, Way) that no longer shrinks
  ShrinkResult result_;
};

}  // namespace

nlohmann::json ShrinkStep::ToJson() const {
  nlohmann::json fs = nlohmann::json::array();
  for (const auto& f : faults) fs.push_back(Describe(f));
  return {{"action", action}, {"faults", fs}, {"failed", failed}, {"accepted", accepted}};
}

ShrinkResult Shrink(const std::vector<GenFault>& failing, const ShrinkPredicate& fails,
                    const ShrinkFits& fits, const ShrinkLimits& limits) {
  Shrinker s(fails, fits, limits);
  return s.Run(failing);
}

std::string TopologyShape::Describe() const {
  return std::to_string(hosts) + " hosts x " + std::to_string(ranks_per_host) + " rank" +
         (ranks_per_host == 1 ? "" : "s") + ", " + std::to_string(rails) + " rail" +
         (rails == 1 ? "" : "s") + ", " + std::to_string(bytes) + " B";
}

nlohmann::json TopologyStep::ToJson() const {
  return {{"action", action},
          {"hosts", shape.hosts},
          {"ranks_per_host", shape.ranks_per_host},
          {"rails", shape.rails},
          {"bytes", shape.bytes},
          {"failed", failed}};
}

TopologyShrinkResult ShrinkTopology(const TopologyShape& start, const std::vector<GenFault>& faults,
                                    const TopologyPredicate& fails, int max_candidates,
                                    uint64_t min_bytes) {
  TopologyShrinkResult r;
  r.minimal = start;
  int max_host = 0, max_rail = 0, max_rank = 0;
  for (const auto& f : faults) {
    max_host = std::max(max_host, f.host);
    max_rank = std::max(max_rank, f.rank);
    if (f.type == "conn_corrupt") max_host = std::max(max_host, f.peer_host);
    max_rail = std::max(max_rail, f.rail);
  }
  int asked = 0;
  // Asks about `c`; true when it fails (it is then the current shape).
  auto ask = [&](TopologyShape c, const std::string& action) {
    if (r.out_of_budget) return false;
    if (asked >= max_candidates) {
      r.out_of_budget = true;
      return false;
    }
    ++asked;
    const CandidateVerdict v = fails(c);
    if (v == CandidateVerdict::kOutOfBudget) {
      r.out_of_budget = true;
      return false;
    }
    const bool failed = v == CandidateVerdict::kFails;
    r.steps.push_back({action, c, failed});
    if (failed) r.minimal = c;
    return failed;
  };
  // A fault on a rank's own port keeps that rank.
  if (r.minimal.ranks_per_host > max_rank + 1) {
    TopologyShape c = r.minimal;
    c.ranks_per_host = max_rank + 1;
    ask(c, std::to_string(c.ranks_per_host) + " rank" + (c.ranks_per_host == 1 ? "" : "s") +
               " per host");
  }
  const int min_hosts = std::max(2, max_host + 1);
  if (r.minimal.hosts > min_hosts) {
    TopologyShape c = r.minimal;
    c.hosts = min_hosts;
    ask(c, std::to_string(min_hosts) + " hosts");
  }
  while (r.minimal.rails > max_rail + 1) {
    TopologyShape c = r.minimal;
    c.rails = r.minimal.rails - 1;
    if (!ask(c, std::to_string(c.rails) + " rail" + (c.rails == 1 ? "" : "s"))) break;
  }
  while (r.minimal.bytes / 2 >= min_bytes) {
    TopologyShape c = r.minimal;
    c.bytes = r.minimal.bytes / 2;
    if (!ask(c, "halve the message to " + std::to_string(c.bytes) + " B")) break;
  }
  return r;
}

bool ConfirmKOfN(const std::function<bool()>& run_fails, int k, int n, int* runs) {
  int failed = 0, done = 0;
  while (done < n && failed < k && failed + (n - done) >= k) {
    if (run_fails()) ++failed;
    ++done;
  }
  if (runs) *runs = done;
  return failed >= k;
}

}  // namespace faultline::runner::explore
