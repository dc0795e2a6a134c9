#include "injector/conn_reset.h"

#include "injector/params.h"
#include "injector/policy.h"

namespace faultline {
namespace {
Result<uint16_t> Port(const nlohmann::json& p, const char* key) {
  FL_ASSIGN_OR_RETURN(int64_t v, params::Int(p, key, 0));
  if (v < 0 || v > 65535) return InvalidArgument(std::string(key) + " must be a port (0-65535)");
  return static_cast<uint16_t>(v);
}
}  // namespace

Result<ConnResetParams> ConnResetParams::FromJson(const nlohmann::json& p) {
  FL_RETURN_IF_ERROR(params::CheckKeys(p, {"netns", "src", "dst", "sport", "dport"}));
  ConnResetParams out;
  FL_ASSIGN_OR_RETURN(out.netns, params::String(p, "netns", std::nullopt));
  FL_ASSIGN_OR_RETURN(out.filter.src, params::String(p, "src", ""));
  FL_ASSIGN_OR_RETURN(out.filter.dst, params::String(p, "dst", ""));
  FL_ASSIGN_OR_RETURN(out.filter.sport, Port(p, "sport"));
  FL_ASSIGN_OR_RETURN(out.filter.dport, Port(p, "dport"));
  return out;
}

nlohmann::json ConnResetParams::ToJson() const {
  return {{"netns", netns},
          {"src", filter.src},
          {"dst", filter.dst},
          {"sport", filter.sport},
          {"dport", filter.dport}};
}

Result<std::unique_ptr<Fault>> ConnResetFault::Create(const nlohmann::json& p) {
  FL_ASSIGN_OR_RETURN(ConnResetParams params, ConnResetParams::FromJson(p));
  return std::unique_ptr<Fault>(new ConnResetFault(std::move(params)));
}

Result<nlohmann::json> ConnResetFault::Prepare(const TargetPolicy& policy) {
  FL_RETURN_IF_ERROR(policy.CheckNetns(params_.netns));
  return nlohmann::json{{"netns", params_.netns}};
}

Status ConnResetFault::Apply(MonoNs) {
  FL_ASSIGN_OR_RETURN(std::vector<TcpSocketInfo> all, ListTcpConnections(params_.netns));
  std::vector<TcpSocketInfo> match;
  for (const TcpSocketInfo& s : all) {
    if (params_.filter.Matches(s)) match.push_back(s);
  }
  matched_ = static_cast<int>(match.size());
  FL_ASSIGN_OR_RETURN(destroyed_, DestroyTcpSockets(params_.netns, match));
  return Status::Ok();
}

Result<nlohmann::json> ConnResetFault::Observe() {
  FL_ASSIGN_OR_RETURN(std::vector<TcpSocketInfo> all, ListTcpConnections(params_.netns));
  int remaining = 0;
  for (const TcpSocketInfo& s : all) {
    if (params_.filter.Matches(s)) ++remaining;
  }
  return nlohmann::json{{"in_effect", remaining == 0},
                        {"matched", matched_},
                        {"destroyed", destroyed_},
                        {"remaining", remaining}};
}

}  // namespace faultline
