#include "runner/policy/cost_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <set>

namespace faultline::policy {
namespace {

using nlohmann::json;

constexpr std::array<RecoveryPolicy, 4> kOptionOrder = {
    RecoveryPolicy::kFailStop, RecoveryPolicy::kFailover, RecoveryPolicy::kWait,
    RecoveryPolicy::kShrink};
// Equal costs go to the first of these.
constexpr std::array<RecoveryPolicy, 4> kTieOrder = {RecoveryPolicy::kFailover,
                                                     RecoveryPolicy::kWait, RecoveryPolicy::kShrink,
                                                     RecoveryPolicy::kFailStop};

// Non-negative and finite: NaN and anything above the cap become the cap.
double Cap(double x) {
  if (std::isnan(x) || x > kMaxLostGpuSeconds) return kMaxLostGpuSeconds;
  return std::max(0.0, x);
}

// The outage as the model sees it: permanent, or expected to last remaining_s more.
struct Outage {
  bool permanent = false;
  double remaining_s = 0;
};

bool Outlasted(const PolicyState& s) {
  return s.expected_outage_s.has_value() && s.outage_so_far_s > *s.expected_outage_s;
}

Outage OutageOf(const PolicyState& s) {
  if (!s.expected_outage_s.has_value() || Outlasted(s)) return {true, 0};
  return {false, std::max(0.0, *s.expected_outage_s - s.outage_so_far_s)};
}

bool IsPathFault(const PolicyState& s) { return s.fault_class != FaultClassKind::kRank; }

// Extra wall time of running `steps` steps degraded for at most `outage` (permanent: all of
// them): k (t_d - t) with k = min(D / t_d, steps), t_d = t ((1 - c) + c / b), written as
// min(D, steps t_d) (1 - t / t_d) so that a vanishing b overflows to the cap, not to NaN.
// REQUIRES: b > 0.
double DegradedExtra(const PolicyState& s, const Outage& outage, double steps) {
  const double c = s.comm_fraction;
  const double b = s.surviving_bandwidth_fraction;
  if (steps <= 0 || c == 0 || b >= 1) return 0;
  const double excess = c * (1 / b - 1);                    // (t_d - t) / t, in (0, inf]
  const double all_steps = steps * s.step_time_s * excess;  // every step degraded
  if (outage.permanent) return Cap(all_steps);
  const double outage_steps_time = steps * s.step_time_s * (1 + excess);  // steps x t_d
  if (outage.remaining_s >= outage_steps_time) return Cap(all_steps);
  const double share = std::isinf(excess) ? 1.0 : excess / (1 + excess);  // 1 - t / t_d
  return Cap(outage.remaining_s * share);
}

PolicyEstimate NotApplicable(RecoveryPolicy p, std::string why) {
  PolicyEstimate e;
  e.policy = p;
  e.applicable = false;
  e.why_not = std::move(why);
  return e;
}

PolicyEstimate Applicable(const PolicyState& s, RecoveryPolicy p, double stall_s,
                          double lost_work_s, double degraded_s, double capacity_loss_gpu_s) {
  PolicyEstimate e;
  e.policy = p;
  e.applicable = true;
  e.stall_s = Cap(stall_s);
  e.lost_work_s = Cap(lost_work_s);
  e.degraded_s = Cap(degraded_s);
  e.capacity_loss_gpu_s = Cap(capacity_loss_gpu_s);
  const double n = s.world_size;
  e.lost_gpu_seconds = Cap(n * (e.stall_s + e.lost_work_s + e.degraded_s) + e.capacity_loss_gpu_s);
  return e;
}

PolicyEstimate Failover(const PolicyState& s, const Outage& outage) {
  if (!IsPathFault(s)) {
    return NotApplicable(RecoveryPolicy::kFailover, "no path to a dead rank");
  }
  if (s.surviving_bandwidth_fraction <= 0) {
    return NotApplicable(RecoveryPolicy::kFailover,
                         "no surviving path to some peer (surviving bandwidth 0)");
  }
  const double degraded = DegradedExtra(s, outage, static_cast<double>(s.steps_remaining));
  return Applicable(s, RecoveryPolicy::kFailover, s.failover_switch_cost_s, 0, degraded, 0);
}

PolicyEstimate Shrink(const PolicyState& s) {
  if (s.world_size < 2) {
    return NotApplicable(RecoveryPolicy::kShrink, "a single rank cannot shrink");
  }
  const double n = s.world_size;
  const double m = n - s.shrink_ranks;
  const double t = s.step_time_s;
  const double t_s = s.shrunk_step_time_s.value_or(t);
  // N (n t_s - m t); with t_s = t exactly k N t (no rounding of the difference).
  const double per_step = t_s == t ? s.shrink_ranks * t : n * t_s - m * t;
  return Applicable(s, RecoveryPolicy::kShrink, s.shrink_cost_s, 0, 0,
                    static_cast<double>(s.steps_remaining) * per_step);
}

PolicyEstimate FailStop(const PolicyState& s, const Outage& outage) {
  double stall = s.restart_cost_s;
  double degraded = 0;
  if (IsPathFault(s)) {
    const bool still_there = outage.permanent || outage.remaining_s > s.restart_cost_s;
    if (still_there) {
      const Outage after{outage.permanent,
                         outage.permanent ? 0 : outage.remaining_s - s.restart_cost_s};
      if (s.surviving_bandwidth_fraction > 0) {
        const double steps_after = static_cast<double>(s.steps_remaining) +
                                   s.checkpoint_age_s / s.step_time_s;  // with the replay
        degraded = DegradedExtra(s, after, steps_after);
      } else if (after.permanent) {
        return NotApplicable(RecoveryPolicy::kFailStop,
                             "a restart in place does not repair a permanent outage with no "
                             "surviving path: the job could make no progress");
      } else {
        stall += after.remaining_s;  // no progress until the path returns
      }
    }
  }
  return Applicable(s, RecoveryPolicy::kFailStop, stall, s.checkpoint_age_s, degraded, 0);
}

// The first of `candidates` (in kTieOrder) with the least cost; null if none applies.
const PolicyEstimate* Cheapest(const std::vector<PolicyEstimate>& candidates) {
  const PolicyEstimate* best = nullptr;
  for (RecoveryPolicy p : kTieOrder) {
    for (const PolicyEstimate& e : candidates) {
      if (e.policy != p || !e.applicable) continue;
      if (best == nullptr || e.lost_gpu_seconds < best->lost_gpu_seconds) best = &e;
    }
  }
  return best;
}

PolicyEstimate Wait(const PolicyState& s, const Outage& outage) {
  if (!IsPathFault(s)) return NotApplicable(RecoveryPolicy::kWait, "no path to a dead rank");
  if (outage.permanent) {
    return NotApplicable(RecoveryPolicy::kWait,
                         Outlasted(s) ? "the outage outlasted its estimate (taken as permanent)"
                                      : "the outage is permanent");
  }
  const double held = std::min(outage.remaining_s, s.wait_bound_s);
  if (outage.remaining_s <= s.wait_bound_s) {
    return Applicable(s, RecoveryPolicy::kWait, held, 0, 0, 0);
  }
  // The wait gives up after wait_bound_s; then the cheapest other policy, from that moment.
  const Outage later{false, outage.remaining_s - s.wait_bound_s};
  const std::vector<PolicyEstimate> others = {FailStop(s, later), Failover(s, later), Shrink(s)};
  const PolicyEstimate* then = Cheapest(others);
  FL_CHECK(then != nullptr);  // shrink applies to every link / nic fault (world_size >= 2)
  PolicyEstimate e = Applicable(s, RecoveryPolicy::kWait, held + then->stall_s, then->lost_work_s,
                                then->degraded_s, then->capacity_loss_gpu_s);
  e.fallback = then->policy;
  return e;
}

bool IsFinite(double x) { return std::isfinite(x); }

Status CheckTime(const char* name, double v) {
  if (!IsFinite(v) || v < 0) {
    return InvalidArgument(std::string(name) + " must be a finite number >= 0, got " +
                           std::to_string(v));
  }
  return Status::Ok();
}

Status CheckFraction(const char* name, double v) {
  if (!IsFinite(v) || v < 0 || v > 1) {
    return InvalidArgument(std::string(name) + " must be in [0, 1], got " + std::to_string(v));
  }
  return Status::Ok();
}

const char* const kInputKeys[] = {"fault_class",        "world_size",
                                  "steps_remaining",    "step_time_s",
                                  "comm_fraction",      "surviving_bandwidth_fraction",
                                  "outage_so_far_s",    "expected_outage_s",
                                  "checkpoint_age_s",   "restart_cost_s",
                                  "shrink_cost_s",      "shrink_ranks",
                                  "shrunk_step_time_s", "failover_switch_cost_s",
                                  "wait_bound_s"};

const char* const kOptionKeys[] = {"policy",  "applicable",  "why_not",    "lost_gpu_s",
                                   "stall_s", "lost_work_s", "degraded_s", "capacity_loss_gpu_s",
                                   "fallback"};

Status OnlyKeys(const json& obj, const char* const* keys, size_t n, const std::string& where) {
  for (const auto& [k, v] : obj.items()) {
    if (std::find(keys, keys + n, k) == keys + n) {
      return InvalidArgument(where + ": unknown key \"" + k + "\"");
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (!obj.contains(keys[i])) {
      return InvalidArgument(where + ": missing key \"" + keys[i] + "\"");
    }
  }
  return Status::Ok();
}

Result<double> NumberAt(const json& obj, const char* key, const std::string& where) {
  const json& v = obj.at(key);
  if (!v.is_number()) return InvalidArgument(where + "." + key + " must be a number");
  const double d = v.get<double>();
  if (!IsFinite(d)) return InvalidArgument(where + "." + key + " must be finite");
  return d;
}

Result<int64_t> IntegerAt(const json& obj, const char* key, const std::string& where) {
  const json& v = obj.at(key);
  if (!v.is_number_integer()) return InvalidArgument(where + "." + key + " must be an integer");
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return InvalidArgument(where + "." + key + " is out of range");
  }
  return v.get<int64_t>();
}

Status CheckOption(const json& o, const std::string& where) {
  if (!o.is_object()) return InvalidArgument(where + " must be an object");
  FL_RETURN_IF_ERROR(OnlyKeys(o, kOptionKeys, std::size(kOptionKeys), where));
  if (!o["policy"].is_string()) return InvalidArgument(where + ".policy must be a string");
  if (!o["applicable"].is_boolean()) {
    return InvalidArgument(where + ".applicable must be a boolean");
  }
  if (!o["why_not"].is_string()) return InvalidArgument(where + ".why_not must be a string");
  const bool applicable = o["applicable"].get<bool>();
  if (applicable != o["why_not"].get<std::string>().empty()) {
    return InvalidArgument(where + ".why_not must be empty iff the option is applicable");
  }
  for (const char* key :
       {"lost_gpu_s", "stall_s", "lost_work_s", "degraded_s", "capacity_loss_gpu_s"}) {
    FL_ASSIGN_OR_RETURN(double v, NumberAt(o, key, where));
    if (v < 0) return InvalidArgument(where + "." + key + " must be >= 0");
  }
  const json& fb = o["fallback"];
  if (!fb.is_null()) {
    const auto p = fb.is_string() ? ParseRecoveryPolicy(fb.get<std::string>()) : std::nullopt;
    if (!p.has_value() || *p == RecoveryPolicy::kAdaptive || *p == RecoveryPolicy::kWait) {
      return InvalidArgument(where + ".fallback must be null or another policy's name");
    }
  }
  return Status::Ok();
}

}  // namespace

const char* RecoveryPolicyName(RecoveryPolicy p) {
  switch (p) {
    case RecoveryPolicy::kFailStop:
      return "fail_stop";
    case RecoveryPolicy::kFailover:
      return "failover";
    case RecoveryPolicy::kWait:
      return "wait";
    case RecoveryPolicy::kShrink:
      return "shrink";
    case RecoveryPolicy::kAdaptive:
      return "adaptive";
  }
  return "unknown";
}

std::optional<RecoveryPolicy> ParseRecoveryPolicy(std::string_view name) {
  for (RecoveryPolicy p :
       {RecoveryPolicy::kFailStop, RecoveryPolicy::kFailover, RecoveryPolicy::kWait,
        RecoveryPolicy::kShrink, RecoveryPolicy::kAdaptive}) {
    if (name == RecoveryPolicyName(p)) return p;
  }
  return std::nullopt;
}

const char* FaultClassKindName(FaultClassKind k) {
  switch (k) {
    case FaultClassKind::kLink:
      return "link";
    case FaultClassKind::kNic:
      return "nic";
    case FaultClassKind::kRank:
      return "rank";
  }
  return "unknown";
}

std::optional<FaultClassKind> ParseFaultClassKind(std::string_view name) {
  for (FaultClassKind k : {FaultClassKind::kLink, FaultClassKind::kNic, FaultClassKind::kRank}) {
    if (name == FaultClassKindName(k)) return k;
  }
  return std::nullopt;
}

Status ValidatePolicyState(const PolicyState& s) {
  if (s.fault_class != FaultClassKind::kLink && s.fault_class != FaultClassKind::kNic &&
      s.fault_class != FaultClassKind::kRank) {
    return InvalidArgument("fault_class must be link, nic or rank");
  }
  if (s.world_size < 1) {
    return InvalidArgument("world_size must be >= 1, got " + std::to_string(s.world_size));
  }
  if (s.fault_class != FaultClassKind::kRank && s.world_size < 2) {
    return InvalidArgument(std::string("a ") + FaultClassKindName(s.fault_class) +
                           " fault needs world_size >= 2 (a path between two ranks)");
  }
  if (s.steps_remaining < 0) {
    return InvalidArgument("steps_remaining must be >= 0, got " +
                           std::to_string(s.steps_remaining));
  }
  if (!IsFinite(s.step_time_s) || s.step_time_s <= 0) {
    return InvalidArgument("step_time_s must be a finite number > 0, got " +
                           std::to_string(s.step_time_s));
  }
  FL_RETURN_IF_ERROR(CheckFraction("comm_fraction", s.comm_fraction));
  FL_RETURN_IF_ERROR(CheckFraction("surviving_bandwidth_fraction", s.surviving_bandwidth_fraction));
  FL_RETURN_IF_ERROR(CheckTime("outage_so_far_s", s.outage_so_far_s));
  if (s.expected_outage_s.has_value()) {
    FL_RETURN_IF_ERROR(CheckTime("expected_outage_s", *s.expected_outage_s));
  }
  FL_RETURN_IF_ERROR(CheckTime("checkpoint_age_s", s.checkpoint_age_s));
  FL_RETURN_IF_ERROR(CheckTime("restart_cost_s", s.restart_cost_s));
  FL_RETURN_IF_ERROR(CheckTime("shrink_cost_s", s.shrink_cost_s));
  if (s.shrink_ranks < 1 || s.shrink_ranks > std::max(1, s.world_size - 1)) {
    return InvalidArgument("shrink_ranks must be in [1, " +
                           std::to_string(std::max(1, s.world_size - 1)) + "], got " +
                           std::to_string(s.shrink_ranks));
  }
  if (s.shrunk_step_time_s.has_value() &&
      (!IsFinite(*s.shrunk_step_time_s) || *s.shrunk_step_time_s <= 0)) {
    return InvalidArgument("shrunk_step_time_s must be a finite number > 0, got " +
                           std::to_string(*s.shrunk_step_time_s));
  }
  FL_RETURN_IF_ERROR(CheckTime("failover_switch_cost_s", s.failover_switch_cost_s));
  FL_RETURN_IF_ERROR(CheckTime("wait_bound_s", s.wait_bound_s));
  return Status::Ok();
}

double RingStepTimeEstimate(double step_time_s, double comm_fraction, int n, int m,
                            double speedup) {
  FL_CHECK(step_time_s > 0 && comm_fraction >= 0 && comm_fraction <= 1 && speedup > 0 && m >= 1 &&
           m <= n);
  const double t = step_time_s;
  const double c = comm_fraction;
  if (m <= 1) return std::max((1 - c) * t, 1e-6);
  const double ring = (static_cast<double>(m - 1) / m) / (static_cast<double>(n - 1) / n);
  return std::max((1 - c) * t + c * t * ring / speedup, 1e-6);
}

double FlappingOutageRemaining(int downs, double flapping_s, double held_s, double holddown_s,
                               double holddown_max_s) {
  FL_CHECK(downs >= 2 && IsFinite(flapping_s) && flapping_s >= 0 && IsFinite(held_s) &&
           held_s >= 0 && IsFinite(holddown_s) && holddown_s >= 0 && IsFinite(holddown_max_s) &&
           holddown_max_s >= 0);
  // holddown x 2^(n-1) for n = 2 downs, doubled no further than the cap.
  double hold = holddown_s;
  for (int i = 1; i < 2 * downs && hold < holddown_max_s; ++i) hold *= 2;
  hold = std::min(hold, holddown_max_s);
  return std::max(held_s, flapping_s + hold);
}

PolicyDecision Decide(const PolicyState& s) {
  FL_CHECK(ValidatePolicyState(s).ok());
  const Outage outage = OutageOf(s);
  PolicyDecision d;
  d.outage_outlasted_estimate = Outlasted(s);
  for (RecoveryPolicy p : kOptionOrder) {
    switch (p) {
      case RecoveryPolicy::kFailStop:
        d.options.push_back(FailStop(s, outage));
        break;
      case RecoveryPolicy::kFailover:
        d.options.push_back(Failover(s, outage));
        break;
      case RecoveryPolicy::kWait:
        d.options.push_back(Wait(s, outage));
        break;
      case RecoveryPolicy::kShrink:
        d.options.push_back(Shrink(s));
        break;
      case RecoveryPolicy::kAdaptive:
        break;
    }
  }
  const PolicyEstimate* best = Cheapest(d.options);
  FL_CHECK(best != nullptr);  // fail_stop for a rank fault, shrink for a link / nic one
  d.chosen = best->policy;
  return d;
}

json DecisionToJson(const PolicyState& s, const PolicyDecision& d) {
  json inputs = {
      {"fault_class", FaultClassKindName(s.fault_class)},
      {"world_size", s.world_size},
      {"steps_remaining", s.steps_remaining},
      {"step_time_s", s.step_time_s},
      {"comm_fraction", s.comm_fraction},
      {"surviving_bandwidth_fraction", s.surviving_bandwidth_fraction},
      {"outage_so_far_s", s.outage_so_far_s},
      {"expected_outage_s",
       s.expected_outage_s.has_value() ? json(*s.expected_outage_s) : json(nullptr)},
      {"checkpoint_age_s", s.checkpoint_age_s},
      {"restart_cost_s", s.restart_cost_s},
      {"shrink_cost_s", s.shrink_cost_s},
      {"shrink_ranks", s.shrink_ranks},
      {"shrunk_step_time_s",
       s.shrunk_step_time_s.has_value() ? json(*s.shrunk_step_time_s) : json(nullptr)},
      {"failover_switch_cost_s", s.failover_switch_cost_s},
      {"wait_bound_s", s.wait_bound_s},
  };
  json options = json::array();
  for (const PolicyEstimate& e : d.options) {
    options.push_back({
        {"policy", RecoveryPolicyName(e.policy)},
        {"applicable", e.applicable},
        {"why_not", e.why_not},
        {"lost_gpu_s", e.lost_gpu_seconds},
        {"stall_s", e.stall_s},
        {"lost_work_s", e.lost_work_s},
        {"degraded_s", e.degraded_s},
        {"capacity_loss_gpu_s", e.capacity_loss_gpu_s},
        {"fallback",
         e.fallback.has_value() ? json(RecoveryPolicyName(*e.fallback)) : json(nullptr)},
    });
  }
  return {{"kind", "policy_decision"},
          {"chosen", RecoveryPolicyName(d.chosen)},
          {"inputs", std::move(inputs)},
          {"options", std::move(options)},
          {"outage_outlasted_estimate", d.outage_outlasted_estimate}};
}

Result<PolicyState> PolicyStateFromJson(const json& in) {
  const std::string where = "inputs";
  if (!in.is_object()) return InvalidArgument("inputs must be an object");
  FL_RETURN_IF_ERROR(OnlyKeys(in, kInputKeys, std::size(kInputKeys), where));
  PolicyState s;
  const json& cls = in["fault_class"];
  const auto kind = cls.is_string() ? ParseFaultClassKind(cls.get<std::string>()) : std::nullopt;
  if (!kind.has_value()) return InvalidArgument("inputs.fault_class must be link, nic or rank");
  s.fault_class = *kind;
  FL_ASSIGN_OR_RETURN(int64_t world, IntegerAt(in, "world_size", where));
  if (world < 1 || world > INT32_MAX) {
    return InvalidArgument("inputs.world_size must be in [1, 2^31), got " + std::to_string(world));
  }
  s.world_size = static_cast<int>(world);
  FL_ASSIGN_OR_RETURN(s.steps_remaining, IntegerAt(in, "steps_remaining", where));
  FL_ASSIGN_OR_RETURN(s.step_time_s, NumberAt(in, "step_time_s", where));
  FL_ASSIGN_OR_RETURN(s.comm_fraction, NumberAt(in, "comm_fraction", where));
  FL_ASSIGN_OR_RETURN(s.surviving_bandwidth_fraction,
                      NumberAt(in, "surviving_bandwidth_fraction", where));
  FL_ASSIGN_OR_RETURN(s.outage_so_far_s, NumberAt(in, "outage_so_far_s", where));
  if (!in["expected_outage_s"].is_null()) {
    FL_ASSIGN_OR_RETURN(double expected, NumberAt(in, "expected_outage_s", where));
    s.expected_outage_s = expected;
  }
  FL_ASSIGN_OR_RETURN(s.checkpoint_age_s, NumberAt(in, "checkpoint_age_s", where));
  FL_ASSIGN_OR_RETURN(s.restart_cost_s, NumberAt(in, "restart_cost_s", where));
  FL_ASSIGN_OR_RETURN(s.shrink_cost_s, NumberAt(in, "shrink_cost_s", where));
  FL_ASSIGN_OR_RETURN(int64_t shrink_ranks, IntegerAt(in, "shrink_ranks", where));
  if (shrink_ranks < 1 || shrink_ranks > INT32_MAX) {
    return InvalidArgument("inputs.shrink_ranks must be in [1, 2^31), got " +
                           std::to_string(shrink_ranks));
  }
  s.shrink_ranks = static_cast<int>(shrink_ranks);
  if (!in["shrunk_step_time_s"].is_null()) {
    FL_ASSIGN_OR_RETURN(double shrunk, NumberAt(in, "shrunk_step_time_s", where));
    s.shrunk_step_time_s = shrunk;
  }
  FL_ASSIGN_OR_RETURN(s.failover_switch_cost_s, NumberAt(in, "failover_switch_cost_s", where));
  FL_ASSIGN_OR_RETURN(s.wait_bound_s, NumberAt(in, "wait_bound_s", where));
  Status valid = ValidatePolicyState(s);
  if (!valid.ok()) return valid.WithContext("inputs");
  return s;
}

Status ValidateDecisionJson(const json& line) {
  if (!line.is_object()) return InvalidArgument("a decision line must be a JSON object");
  for (const char* key : {"kind", "chosen", "inputs", "options", "outage_outlasted_estimate"}) {
    if (!line.contains(key)) return InvalidArgument(std::string("missing key \"") + key + "\"");
  }
  if (line["kind"] != "policy_decision") return InvalidArgument("kind must be policy_decision");
  FL_ASSIGN_OR_RETURN(PolicyState s, PolicyStateFromJson(line["inputs"]));
  if (!line["outage_outlasted_estimate"].is_boolean()) {
    return InvalidArgument("outage_outlasted_estimate must be a boolean");
  }
  if (line["outage_outlasted_estimate"].get<bool>() != Outlasted(s)) {
    return InvalidArgument("outage_outlasted_estimate disagrees with the inputs");
  }
  const json& options = line["options"];
  if (!options.is_array()) return InvalidArgument("options must be an array");
  std::set<std::string> seen;
  for (size_t i = 0; i < options.size(); ++i) {
    const std::string where = "options[" + std::to_string(i) + "]";
    FL_RETURN_IF_ERROR(CheckOption(options[i], where));
    const std::string name = options[i]["policy"].get<std::string>();
    const auto p = ParseRecoveryPolicy(name);
    if (!p.has_value() || *p == RecoveryPolicy::kAdaptive) {
      return InvalidArgument(where + ".policy \"" + name + "\" is not an option's name");
    }
    if (!seen.insert(name).second) return InvalidArgument(where + ": policy " + name + " twice");
  }
  if (seen.size() != kOptionOrder.size()) {
    return InvalidArgument("options must hold fail_stop, failover, wait and shrink once each");
  }
  if (!line["chosen"].is_string()) return InvalidArgument("chosen must be a string");
  const std::string chosen = line["chosen"].get<std::string>();
  const json* chosen_option = nullptr;
  double least = kMaxLostGpuSeconds;
  for (const json& o : options) {
    if (!o["applicable"].get<bool>()) continue;
    least = std::min(least, o["lost_gpu_s"].get<double>());
    if (o["policy"] == chosen) chosen_option = &o;
  }
  if (chosen_option == nullptr) {
    return InvalidArgument("chosen \"" + chosen + "\" is not an applicable option");
  }
  if ((*chosen_option)["lost_gpu_s"].get<double>() > least) {
    return InvalidArgument("chosen \"" + chosen + "\" is not the least-cost applicable option");
  }
  return Status::Ok();
}

}  // namespace faultline::policy
