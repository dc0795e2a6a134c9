#include "injector/bandwidth.h"

#include "base/units.h"
#include "injector/params.h"
#include "injector/policy.h"

namespace faultline {

Result<BandwidthParams> BandwidthParams::FromJson(const nlohmann::json& p) {
  FL_RETURN_IF_ERROR(params::CheckKeys(p, {"netns", "dev", "rate", "burst"}));
  BandwidthParams out;
  FL_ASSIGN_OR_RETURN(out.netns, params::String(p, "netns", std::nullopt));
  FL_ASSIGN_OR_RETURN(out.dev, params::String(p, "dev", std::nullopt));
  FL_ASSIGN_OR_RETURN(out.rate_bits_per_s, params::Rate(p, "rate", std::nullopt));
  FL_ASSIGN_OR_RETURN(uint64_t burst, params::Size(p, "burst", 0));
  if (burst > 0xFFFFFFFFu) return InvalidArgument("bandwidth: burst must be below 4 GiB");
  out.burst_bytes = static_cast<uint32_t>(burst);
  return out;
}

nlohmann::json BandwidthParams::ToJson() const {
  return {{"netns", netns},
          {"dev", dev},
          {"rate_bps", rate_bits_per_s},
          {"rate", FormatRate(rate_bits_per_s)},
          {"burst_bytes", burst_bytes}};
}

Result<std::unique_ptr<Fault>> BandwidthFault::Create(const nlohmann::json& p) {
  FL_ASSIGN_OR_RETURN(BandwidthParams params, BandwidthParams::FromJson(p));
  return std::unique_ptr<Fault>(new BandwidthFault(std::move(params)));
}

Result<nlohmann::json> BandwidthFault::Prepare(const TargetPolicy& policy) {
  FL_RETURN_IF_ERROR(policy.CheckInterface(params_.netns, params_.dev));
  FL_ASSIGN_OR_RETURN(NlSock sock, NlSock::ConnectInNetns(params_.netns));
  FL_ASSIGN_OR_RETURN(LinkState link, GetLink(sock, params_.dev));
  ifindex_ = link.ifindex;
  FL_ASSIGN_OR_RETURN(std::optional<QdiscInfo> root, GetRootQdisc(sock, ifindex_));
  undo_ = {{"netns", params_.netns}, {"dev", params_.dev}};
  if (!root || root->handle == 0) {
    undo_["mode"] = "create";
  } else if (root->handle == kShapingHandle && root->kind == "tbf") {
    change_shaping_ = true;
    undo_["mode"] = "change";
    undo_["saved"] = root->ToUndoJson();
  } else if (root->handle == kFaultHandle && root->kind == "tbf") {
    return AlreadyExists("a bandwidth fault is already active on '" + params_.dev + "' in '" +
                         params_.netns + "'");
  } else if (root->handle == kFaultHandle) {
    return AlreadyExists("a " + root->kind + " fault holds the root qdisc " +
                         HandleString(root->handle) + " of '" + params_.dev + "' in '" +
                         params_.netns + "'; a bandwidth fault composes with it only on a rail " +
                         "the runner shapes (root tbf " + HandleString(kShapingHandle) +
                         "); refusing");
  } else {
    return AlreadyExists("'" + params_.dev + "' in '" + params_.netns + "' has a root qdisc " +
                         root->kind + " " + HandleString(root->handle) +
                         " that faultline did not create; refusing to touch it");
  }
  sock_.emplace(std::move(sock));
  return undo_;
}

Status BandwidthFault::Apply(MonoNs) {
  TbfConfig c;
  c.rate_bits_per_s = params_.rate_bits_per_s;
  c.burst_bytes = params_.burst_bytes;
  if (change_shaping_) return ChangeRootTbf(*sock_, ifindex_, kShapingHandle, c);
  return CreateRootTbf(*sock_, ifindex_, kFaultHandle, c);
}

Status BandwidthFault::Undo(const nlohmann::json& undo) {
  std::string netns = undo.value("netns", "");
  std::string dev = undo.value("dev", "");
  FL_ASSIGN_OR_RETURN(NlSock sock, NlSock::ConnectInNetns(netns));
  FL_ASSIGN_OR_RETURN(LinkState link, GetLink(sock, dev));
  if (undo.value("mode", "") == "change") {
    FL_ASSIGN_OR_RETURN(QdiscInfo saved, QdiscInfo::FromUndoJson(undo["saved"]));
    return RestoreRootTbf(sock, link.ifindex, saved);
  }
  Status st = DeleteRootQdisc(sock, link.ifindex, kFaultHandle);
  if (st.code() == Code::kNotFound) return Status::Ok();  // already gone
  return st;
}

Status BandwidthFault::Revert() { return Undo(undo_); }

Result<nlohmann::json> BandwidthFault::Observe() {
  FL_ASSIGN_OR_RETURN(std::optional<QdiscInfo> root, GetRootQdisc(*sock_, ifindex_));
  uint32_t want = change_shaping_ ? kShapingHandle : kFaultHandle;
  bool in_effect = root && root->handle == want && root->kind == "tbf" &&
                   root->rate_bytes_per_s == params_.rate_bits_per_s / 8;
  nlohmann::json out = {{"in_effect", in_effect}};
  out["root_qdisc"] = root ? root->ToJson() : nlohmann::json(nullptr);
  return out;
}

}  // namespace faultline
