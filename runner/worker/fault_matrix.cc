#include "runner/worker/fault_matrix.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <utility>

#include "runner/policy/cost_model.h"

namespace faultline::runner {

size_t FaultMatrix::Size() const {
  const size_t n = static_cast<size_t>(world_);
  return kSlots + n + (HasMatrix() ? static_cast<size_t>(kBlocks) * n * n : 0);
}

size_t FaultMatrix::MatrixSlot(int from, int to, int block) const {
  const size_t n = static_cast<size_t>(world_);
  return kSlots + n + static_cast<size_t>(block) * n * n + static_cast<size_t>(from * world_ + to);
}

int64_t FaultMatrix::PairRate(const std::vector<int64_t>& v, int a, int b, int block) const {
  return std::max(v[MatrixSlot(a, b, block)], v[MatrixSlot(b, a, block)]);
}

void FaultMatrix::FillLocal(const Local& in, std::vector<int64_t>* v) const {
  const PathTracker& tracker = *in.paths;
  (*v)[kNews] = tracker.news() ? 1 : 0;
  (*v)[kNegStart] = -kPermanent;
  int64_t expected = 0;
  std::map<int, int> rails_down;  // peer -> paths down to it
  const int64_t now = in.now_ns;
  const std::optional<workload::adapters::FlapDamping>& damping = in.damping;
  for (const auto& [key, p] : tracker.paths()) {
    if (!p.down_since) continue;
    (*v)[kNegStart] = std::max((*v)[kNegStart], -*p.down_since);
    // The path's expected outage: the mean of its past outages; none: permanent.
    int64_t e = p.outages > 0 ? p.outage_ns / p.outages : kPermanent;
    // Where the library damps flapping paths, its damping state says more: a path flapping
    // now is out of use until the flapping stops and the hold-down it earned runs out
    // (policy::FlappingOutageRemaining), and none is back before its hold-down ends.
    if (damping) {
      for (const auto& d : damping->paths) {
        if (d.peer != key.first || d.path != key.second) continue;
        const int64_t down_for = std::max<int64_t>(0, now - *p.down_since);
        const double held_s = std::max<int64_t>(0, d.hold_until_ns - now) / 1e9;
        const bool flapping = d.downs_in_window >= 2 && d.first_down_ns > 0 &&
                              now - d.first_down_ns <= damping->window.count() * 1000000LL;
        if (flapping) {
          const double remaining = policy::FlappingOutageRemaining(
              d.downs_in_window, std::max<int64_t>(0, now - d.first_down_ns) / 1e9, held_s,
              damping->holddown.count() / 1e3, damping->holddown_max.count() / 1e3);
          e = down_for + static_cast<int64_t>(remaining * 1e9);
        } else if (e != kPermanent) {
          e = std::max(e, down_for + static_cast<int64_t>(held_s * 1e9));
        }
      }
    }
    expected = std::max(expected, e);
    ++rails_down[key.first];
    if (key.first >= 0 && key.first < world_) {
      (*v)[ScoreSlot(key.first)] = 1;
      if (HasMatrix()) (*v)[MatrixSlot(in.rank, key.first)] = 1;
    }
  }
  if (!rails_down.empty()) {
    (*v)[kDown] = 1;
    (*v)[kExpected] = expected;
  } else if (tracker.news() && tracker.news_since_ns()) {
    (*v)[kNegStart] = -*tracker.news_since_ns();
  }
  if (HasMatrix()) {
    for (int r = 0; r < world_ && static_cast<size_t>(r) < in.ref_rates.size(); ++r) {
      (*v)[MatrixSlot(in.rank, r, kRefRateBlock)] =
          static_cast<int64_t>(in.ref_rates[static_cast<size_t>(r)] / 1e3);
    }
  }
  // Cut off: every path to every other member of the group down.
  bool cut_off = in.members.size() > 1;
  for (int r : in.members) {
    if (r == in.rank) continue;
    auto it = rails_down.find(r);
    if (it == rails_down.end() || it->second < in.rails) cut_off = false;
  }
  if (cut_off || tracker.relay_on()) {
    (*v)[kClass] = 2;
  } else if ((*v)[kDown] != 0 || tracker.news()) {
    (*v)[kClass] = 1;
  }
  // Whether this rank's own NIC port went down during the fault: it is the one a shrink
  // should drop when the down paths alone do not say which end is at fault (a single pair).
  if ((*v)[kClass] != 0) {
    (*v)[ScoreSlot(in.rank)] = (cut_off ? 2 : 1) + (in.own_port_down ? kOwnPortDown : 0);
  }
  // The surviving bandwidth, measured: the fault-free steps' mean allreduce time over the
  // last step's (the rate every rank got, whatever the library did about the fault).
  double b = 1;
  if (in.clean_steps > 0 && in.last_ar_ns > 0) {
    b = std::clamp(static_cast<double>(in.clean_ar_ns) / in.clean_steps / in.last_ar_ns, 0.0, 1.0);
  }
  (*v)[kNegBandwidth] = -static_cast<int64_t>(b * 1e6);
}

std::vector<int> FaultMatrix::AffectedCover(const std::vector<int64_t>& v,
                                            const std::vector<int>& members) const {
  std::vector<int> cover;
  if (members.empty()) return cover;
  if (!HasMatrix()) {
    int victim = -1;
    for (int r : members) {
      if (r == members.front()) continue;
      const int64_t score = v[ScoreSlot(r)];
      if (score > 0 && (victim < 0 || score > v[ScoreSlot(victim)])) victim = r;
    }
    if (victim >= 0) cover.push_back(victim);
    return cover;
  }
  std::set<std::pair<int, int>> edges;
  for (int a : members) {
    for (int b : members) {
      if (a < b && (v[MatrixSlot(a, b)] != 0 || v[MatrixSlot(b, a)] != 0)) edges.insert({a, b});
    }
  }
  const int group = static_cast<int>(members.size());
  auto own_port_down = [&](int r) { return (v[ScoreSlot(r)] & kOwnPortDown) != 0; };
  while (!edges.empty() && static_cast<int>(cover.size()) < group - 1) {
    std::map<int, int> degree;
    for (const auto& [a, b] : edges) {
      ++degree[a];
      ++degree[b];
    }
    int pick = -1;
    for (const auto& [r, d] : degree) {
      if (pick < 0 || d > degree[pick] ||
          (d == degree[pick] && own_port_down(r) && !own_port_down(pick))) {
        pick = r;
      }
    }
    cover.push_back(pick);
    for (auto it = edges.begin(); it != edges.end();) {
      it = (it->first == pick || it->second == pick) ? edges.erase(it) : std::next(it);
    }
  }
  std::sort(cover.begin(), cover.end());
  return cover;
}

std::optional<double> FaultMatrix::ShrunkStepTime(const std::vector<int64_t>& v,
                                                  const std::vector<int>& members,
                                                  const std::vector<int>& cover, double step_time_s,
                                                  double comm_fraction) const {
  if (!HasMatrix() || cover.empty()) return std::nullopt;
  std::vector<int> survivors;
  for (int r : members) {
    if (std::find(cover.begin(), cover.end(), r) == cover.end()) survivors.push_back(r);
  }
  auto slowest = [&](const std::vector<int>& ring, int64_t unknown) -> int64_t {
    int64_t least = 0;
    for (size_t i = 0; i < ring.size() && ring.size() > 1; ++i) {
      int64_t rate = PairRate(v, ring[i], ring[(i + 1) % ring.size()], kRefRateBlock);
      if (rate <= 0) rate = unknown;
      if (rate > 0 && (least == 0 || rate < least)) least = rate;
    }
    return least;
  };
  const int64_t before = slowest(members, 0);
  if (before <= 0) return std::nullopt;
  const int64_t after = slowest(survivors, before);
  const double speedup = after > 0 ? static_cast<double>(after) / before : 1.0;
  return policy::RingStepTimeEstimate(step_time_s, comm_fraction, static_cast<int>(members.size()),
                                      static_cast<int>(survivors.size()), speedup);
}

}  // namespace faultline::runner
