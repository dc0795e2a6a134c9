#include "injector/link_flap.h"

#include <algorithm>
#include <random>

#include "injector/link_down.h"
#include "injector/params.h"
#include "injector/policy.h"

namespace faultline {

Result<LinkFlapParams> LinkFlapParams::FromJson(const nlohmann::json& p) {
  FL_RETURN_IF_ERROR(
      params::CheckKeys(p, {"netns", "dev", "side", "down", "up", "count", "jitter", "seed"}));
  LinkFlapParams out;
  FL_ASSIGN_OR_RETURN(out.target, LinkTargetFromJson(p));
  FL_ASSIGN_OR_RETURN(out.down_ns, params::Duration(p, "down", out.down_ns));
  FL_ASSIGN_OR_RETURN(out.up_ns, params::Duration(p, "up", out.up_ns));
  FL_ASSIGN_OR_RETURN(out.count, params::Int(p, "count", out.count));
  FL_ASSIGN_OR_RETURN(out.jitter_ns, params::Duration(p, "jitter", 0));
  FL_ASSIGN_OR_RETURN(int64_t seed, params::Int(p, "seed", 0));
  out.seed = static_cast<uint64_t>(seed);
  if (out.count < 1) return InvalidArgument("link_flap: count must be >= 1");
  return out;
}

nlohmann::json LinkFlapParams::ToJson() const {
  return {{"netns", target.netns},  {"dev", target.dev}, {"side", LinkSideName(target.side)},
          {"down_ns", down_ns},     {"up_ns", up_ns},    {"count", count},
          {"jitter_ns", jitter_ns}, {"seed", seed}};
}

Result<std::unique_ptr<Fault>> LinkFlapFault::Create(const nlohmann::json& p) {
  FL_ASSIGN_OR_RETURN(LinkFlapParams params, LinkFlapParams::FromJson(p));
  return std::unique_ptr<Fault>(new LinkFlapFault(std::move(params)));
}

Result<nlohmann::json> LinkFlapFault::Prepare(const TargetPolicy& policy) {
  FL_ASSIGN_OR_RETURN(acted_, ResolveLinkTarget(params_.target, policy));
  FL_ASSIGN_OR_RETURN(NlSock sock, NlSock::ConnectInNetns(acted_.netns));
  FL_ASSIGN_OR_RETURN(LinkState s, GetLink(sock, acted_.dev));
  if (!s.admin_up) {
    return InvalidArgument("'" + acted_.dev + "' in '" + acted_.netns +
                           "' is administratively down; nothing to flap");
  }
  sock_.emplace(std::move(sock));
  transitions_.reserve(static_cast<size_t>(params_.count) * 2);
  // The undo of a flap interrupted at any point is "up" (the link was up before).
  return nlohmann::json{{"netns", acted_.netns}, {"dev", acted_.dev}, {"up", true}};
}

Status LinkFlapFault::Apply(MonoNs scheduled) {
  std::mt19937_64 rng(params_.seed);
  std::uniform_int_distribution<int64_t> jitter(-params_.jitter_ns, params_.jitter_ns);
  auto period = [&](int64_t base) {
    int64_t v = base + (params_.jitter_ns > 0 ? jitter(rng) : 0);
    return std::max<int64_t>(v, 0);
  };
  MonoNs t = scheduled;
  for (int64_t i = 0; i < params_.count * 2; ++i) {
    bool up = (i % 2) == 1;
    SleepUntil(t);
    FlapTransition tr;
    tr.up = up;
    tr.scheduled = t;
    tr.applied = MonoNow();
    Status st = SetLinkUp(*sock_, acted_.dev, up);
    tr.returned = MonoNow();
    if (!st.ok()) return st.WithContext("flap transition " + std::to_string(i));
    if (params_.observe_each) {
      auto s = GetLink(*sock_, acted_.dev);
      tr.observed_ok = s.ok() && s->admin_up == up;
    }
    transitions_.push_back(tr);
    t += period(up ? params_.up_ns : params_.down_ns);
  }
  return Status::Ok();
}

Status LinkFlapFault::Revert() { return SetLinkUp(*sock_, acted_.dev, true); }

Result<nlohmann::json> LinkFlapFault::Observe() {
  FL_ASSIGN_OR_RETURN(nlohmann::json link, ObserveLink(*sock_, acted_));
  int64_t downs = 0, ok = 0;
  nlohmann::json steps = nlohmann::json::array();
  for (const FlapTransition& tr : transitions_) {
    if (!tr.up) ++downs;
    if (tr.observed_ok) ++ok;
    steps.push_back({{"up", tr.up},
                     {"scheduled_ns", tr.scheduled},
                     {"applied_ns", tr.applied},
                     {"returned_ns", tr.returned},
                     {"observed_ok", tr.observed_ok}});
  }
  return nlohmann::json{{"in_effect", !link["admin_up"].get<bool>()},
                        {"link", link},
                        {"flaps_done", downs},
                        {"transitions_observed_ok", ok},
                        {"transitions", steps}};
}

}  // namespace faultline
