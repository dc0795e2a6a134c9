// adaptive: at each boundary the ranks gather their fault state (FaultMatrix); on news, or
// while a path is down and the outage outlasts what the last decision expected of it, the
// group's rank 0 asks the cost model for the cheapest policy; every rank applies the shared
// decision (wait: hold; shrink: drop the affected ranks; fail_stop: restart every rank;
// failover: the library's own recovery goes on). After a lost rank the survivors shrink first
// (the only working path among them) and then decide whether to go on so or to restart.
#include <algorithm>

#include "runner/worker/policies/policy.h"

namespace faultline::runner::policies {
namespace {

constexpr int64_t kPermanent = FaultMatrix::kPermanent;

class AdaptivePolicy final : public Policy {
 public:
  const char* Name() const override { return "adaptive"; }
  bool Flagged() const override { return true; }
  bool Flag(const LocalView& local) const override { return local.news || local.any_path_down; }
  bool WaitsForLostPeers() const override { return true; }
  bool MeasuresPeerRates() const override { return true; }
  Gather BoundaryGather() const override { return Gather::kFaultState; }
  bool Pending() const override { return news_deferred_; }

  Action AtBoundary(const GroupView& g) override {
    const std::vector<int64_t>& v = *g.state;
    // The earliest evidence of this news any rank saw (its outage start), kept through a
    // deferral: the reaction time of the decision counts from it.
    const bool fresh = v[FaultMatrix::kNews] != 0;
    if (fresh && v[FaultMatrix::kNegStart] != -kPermanent) {
      const int64_t start = -v[FaultMatrix::kNegStart];
      evidence_ns_ = std::min(evidence_ns_.value_or(start), start);
    }
    // News of a path fault is decided on one step later: the library has failed over by then,
    // and that step's allreduce measures the bandwidth that survived (the step that held the
    // detection would read its stall as lost bandwidth). A rank cut off from the group (nic)
    // has no step to measure: decided at once. The same on every rank: v is the group's.
    if (fresh && !news_deferred_ && v[FaultMatrix::kClass] != 2 && v[FaultMatrix::kDown] != 0) {
      news_deferred_ = true;
      return {};
    }
    const bool news = fresh || news_deferred_;
    news_deferred_ = false;
    if (!news && v[FaultMatrix::kDown] == 0) return {};
    // Someone has news or a path is still down: rank 0 of the group decides whether to act,
    // and every rank learns the outcome from its broadcast.
    Action share{Action::kShare, "", {}};
    if (!g.coordinator) return share;
    const int group = static_cast<int>(g.members.size());
    const int64_t now = g.now_ns;
    const double so_far = v[FaultMatrix::kNegStart] == -kPermanent
                              ? 0
                              : std::max<int64_t>(0, now + v[FaultMatrix::kNegStart]) / 1e9;
    const bool over = v[FaultMatrix::kDown] == 0;  // the paths came back before this boundary
    // Re-decided when the outage outlasts what the last decision expected of it.
    const bool outlasted = !over && now > decided_until_ns_;
    if (over) decided_until_ns_ = kPermanent;
    if (!news && !outlasted) return share;
    std::optional<int64_t> evidence =
        news ? evidence_ns_ : std::optional<int64_t>(decided_until_ns_);
    if (news) evidence_ns_.reset();
    policy::PolicyState s = g.base;
    s.fault_class =
        v[FaultMatrix::kClass] == 2 ? policy::FaultClassKind::kNic : policy::FaultClassKind::kLink;
    s.surviving_bandwidth_fraction = std::clamp(-v[FaultMatrix::kNegBandwidth] / 1e6, 0.0, 1.0);
    if (over) {
      // A fault already over is an outage of length 0 that has ended.
      s.outage_so_far_s = 0;
      s.expected_outage_s = 0;
    } else {
      s.outage_so_far_s = so_far;
      // The path's own history (the mean of its past outages) where it has one. Without any
      // (or past it), an outage is expected to last as long again as it has so far (at least
      // a step): the estimate doubles at every re-decision, so a permanent one is soon treated
      // as such while a first transient one is not priced as if it never ended.
      if (v[FaultMatrix::kExpected] != kPermanent && v[FaultMatrix::kExpected] / 1e9 > so_far) {
        s.expected_outage_s = v[FaultMatrix::kExpected] / 1e9;
      } else {
        s.expected_outage_s = std::max(2 * so_far, g.base.step_time_s);
      }
    }
    const std::vector<int> cover = g.matrix->AffectedCover(v, g.members);
    s.shrink_ranks = std::clamp(static_cast<int>(cover.size()), 1, std::max(1, group - 1));
    s.shrunk_step_time_s =
        g.matrix->ShrunkStepTime(v, g.members, cover, s.step_time_s, s.comm_fraction);
    if (group < 2) return share;
    DecisionRequest req;
    req.state = s;
    req.trigger = v[FaultMatrix::kDown] != 0 ? "path_down" : "path_fault_over";
    req.shrink_set = cover;
    req.now_ns = now;
    req.fault_over = over;
    req.evidence_ns = evidence;
    share.request = std::move(req);
    return share;
  }

  void Decided(const DecisionRequest& req, bool chosen) override {
    if (chosen && req.state.expected_outage_s && !req.fault_over) {
      decided_until_ns_ =
          req.now_ns +
          static_cast<int64_t>((*req.state.expected_outage_s - req.state.outage_so_far_s) * 1e9);
    }
  }

  Action ApplyAtBoundary(std::optional<policy::RecoveryPolicy> chosen) const override {
    if (!chosen) return {};
    switch (*chosen) {
      case policy::RecoveryPolicy::kWait:
        return {Action::kHold, "", {}};
      case policy::RecoveryPolicy::kShrink:
        return {Action::kShrinkAffected, "the adaptive policy", {}};
      case policy::RecoveryPolicy::kFailStop:
        return {Action::kFailStop, "the adaptive policy chose fail_stop", {}};
      default:
        return {};  // failover: the library's own recovery goes on
    }
  }

  Action OnFailedCall(bool can_shrink) const override {
    return {can_shrink ? Action::kShrinkLostRank : Action::kFail, "", {}};
  }

  // A rank fault: the survivors have shrunk; the new group's rank 0 decides whether to go on
  // so or to restart every rank.
  Action AfterRankLoss(const RankLossView& r) const override {
    Action share{Action::kShare, "", {}};
    if (!r.coordinator) return share;
    DecisionRequest req;
    req.state = r.before;
    req.state.fault_class = policy::FaultClassKind::kRank;
    req.state.surviving_bandwidth_fraction = 0;  // no path to the lost rank
    req.state.outage_so_far_s = r.outage_so_far_s;
    req.state.expected_outage_s.reset();
    // The survivors' ring keeps the same kind of links (the lost rank took none away from the
    // others): only its length changes.
    req.state.shrunk_step_time_s = policy::RingStepTimeEstimate(
        req.state.step_time_s, req.state.comm_fraction, r.group_before, r.group_after, 1.0);
    req.trigger = "rank_lost";
    req.evidence_ns = r.evidence_ns;
    req.shrink_set = {r.lost};
    share.request = std::move(req);
    return share;
  }

  Action ApplyAfterRankLoss(std::optional<policy::RecoveryPolicy> chosen, int lost) const override {
    if (chosen == policy::RecoveryPolicy::kFailStop) {
      return {Action::kFailStop,
              "the adaptive policy chose fail_stop after losing rank " + std::to_string(lost),
              {}};
    }
    return {};  // shrink (or no decision): go on in the smaller group
  }

 private:
  bool news_deferred_ = false;  // news gathered, decided after one measured step
  // The coordinator: when the outage its last decision priced should have ended.
  int64_t decided_until_ns_ = kPermanent;
  // The earliest evidence of the news not yet decided on (kept through a deferral).
  std::optional<int64_t> evidence_ns_;
};

}  // namespace

std::unique_ptr<Policy> MakeAdaptivePolicy() { return std::make_unique<AdaptivePolicy>(); }

}  // namespace faultline::runner::policies
