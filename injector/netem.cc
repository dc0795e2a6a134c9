#include "injector/netem.h"

#include <fcntl.h>
#include <linux/pkt_sched.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/qdisc/netem.h>
#include <sched.h>

#include <cmath>
#include <cstdint>

#include "injector/netns.h"
#include "injector/params.h"
#include "injector/policy.h"
#include "injector/qdisc.h"

namespace faultline {
namespace {

struct QdiscDeleter {
  void operator()(rtnl_qdisc* q) const { rtnl_qdisc_put(q); }
};

int Probability(double percent) {
  double v = std::round(percent / 100.0 * 4294967295.0);
  return static_cast<int>(static_cast<uint32_t>(v));
}

Status AddNetem(NlSock& sock, int ifindex, const NetemParams& p) {
  std::unique_ptr<rtnl_qdisc, QdiscDeleter> q(rtnl_qdisc_alloc());
  if (!q) return Internal("rtnl_qdisc_alloc failed");
  auto* tc = reinterpret_cast<rtnl_tc*>(q.get());
  rtnl_tc_set_ifindex(tc, ifindex);
  rtnl_tc_set_parent(tc, TC_H_ROOT);
  rtnl_tc_set_handle(tc, kFaultHandle);
  int err = rtnl_tc_set_kind(tc, "netem");
  if (err < 0) return NlStatus("netem", err);
  if (p.delay_ns > 0) rtnl_netem_set_delay(q.get(), static_cast<int>(p.delay_ns / 1000));
  if (p.jitter_ns > 0) rtnl_netem_set_jitter(q.get(), static_cast<int>(p.jitter_ns / 1000));
  if (p.kind == "corrupt") rtnl_netem_set_corruption_probability(q.get(), Probability(p.percent));
  if (p.kind == "reorder") {
    rtnl_netem_set_reorder_probability(q.get(), Probability(p.percent));
    rtnl_netem_set_gap(q.get(), 0);
  }
  err = rtnl_qdisc_add(sock.get(), q.get(), NLM_F_CREATE | NLM_F_EXCL);
  if (err == -NLE_OBJ_NOTFOUND || err == -NLE_OPNOTSUPP) {
    return Unavailable(
        "the kernel has no netem qdisc (sch_netem, CONFIG_NET_SCH_NETEM is missing): '" + p.kind +
        "' faults need it");
  }
  if (err < 0) return NlStatus("add netem qdisc", err);
  return Status::Ok();
}

}  // namespace

Status ProbeNetem() {
  // A private namespace that only this thread sees and that vanishes with its last
  // reference: the probe leaves nothing behind.
  int original = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (original < 0) return ErrnoStatus("open /proc/thread-self/ns/net", errno);
  UniqueFd original_fd(original);
  if (::unshare(CLONE_NEWNET) != 0)
    return ErrnoStatus("unshare(CLONE_NEWNET) for netem probe", errno);
  Status st;
  {
    auto sock = NlSock::Connect();
    FL_CHECK(::setns(original_fd.get(), CLONE_NEWNET) == 0);
    if (!sock.ok()) return sock.status();
    NetemParams p;
    p.kind = "delay";
    p.delay_ns = 1'000'000;
    st = AddNetem(*sock, 1 /* lo */, p);
  }
  return st;
}

Result<NetemParams> NetemParams::FromJson(std::string_view kind, const nlohmann::json& p) {
  NetemParams out;
  out.kind = std::string(kind);
  FL_RETURN_IF_ERROR(params::CheckKeys(p, {"netns", "dev", "delay", "jitter", "percent"}));
  FL_ASSIGN_OR_RETURN(out.netns, params::String(p, "netns", std::nullopt));
  FL_ASSIGN_OR_RETURN(out.dev, params::String(p, "dev", std::nullopt));
  if (kind == "delay") {
    FL_ASSIGN_OR_RETURN(out.delay_ns, params::Duration(p, "delay", std::nullopt));
    FL_ASSIGN_OR_RETURN(out.jitter_ns, params::Duration(p, "jitter", 0));
  } else if (kind == "jitter") {
    FL_ASSIGN_OR_RETURN(out.jitter_ns, params::Duration(p, "jitter", std::nullopt));
    FL_ASSIGN_OR_RETURN(out.delay_ns, params::Duration(p, "delay", out.jitter_ns));
  } else if (kind == "corrupt") {
    FL_ASSIGN_OR_RETURN(out.percent, params::Percent(p, "percent", std::nullopt));
  } else if (kind == "reorder") {
    FL_ASSIGN_OR_RETURN(out.percent, params::Percent(p, "percent", std::nullopt));
    FL_ASSIGN_OR_RETURN(out.delay_ns, params::Duration(p, "delay", 10'000'000));
  } else {
    return InvalidArgument("not a netem kind: " + out.kind);
  }
  return out;
}

nlohmann::json NetemParams::ToJson() const {
  return {{"netns", netns},
          {"dev", dev},
          {"delay_ns", delay_ns},
          {"jitter_ns", jitter_ns},
          {"percent", percent}};
}

Result<std::unique_ptr<Fault>> NetemFault::CreateDelay(const nlohmann::json& p) {
  FL_ASSIGN_OR_RETURN(NetemParams np, NetemParams::FromJson("delay", p));
  return std::unique_ptr<Fault>(new NetemFault(std::move(np)));
}
Result<std::unique_ptr<Fault>> NetemFault::CreateJitter(const nlohmann::json& p) {
  FL_ASSIGN_OR_RETURN(NetemParams np, NetemParams::FromJson("jitter", p));
  return std::unique_ptr<Fault>(new NetemFault(std::move(np)));
}
Result<std::unique_ptr<Fault>> NetemFault::CreateCorrupt(const nlohmann::json& p) {
  FL_ASSIGN_OR_RETURN(NetemParams np, NetemParams::FromJson("corrupt", p));
  return std::unique_ptr<Fault>(new NetemFault(std::move(np)));
}
Result<std::unique_ptr<Fault>> NetemFault::CreateReorder(const nlohmann::json& p) {
  FL_ASSIGN_OR_RETURN(NetemParams np, NetemParams::FromJson("reorder", p));
  return std::unique_ptr<Fault>(new NetemFault(std::move(np)));
}

Result<nlohmann::json> NetemFault::Prepare(const TargetPolicy& policy) {
  FL_RETURN_IF_ERROR(policy.CheckInterface(params_.netns, params_.dev));
  FL_RETURN_IF_ERROR(ProbeNetem());
  FL_ASSIGN_OR_RETURN(NlSock sock, NlSock::ConnectInNetns(params_.netns));
  FL_ASSIGN_OR_RETURN(LinkState link, GetLink(sock, params_.dev));
  ifindex_ = link.ifindex;
  FL_ASSIGN_OR_RETURN(std::optional<QdiscInfo> root, GetRootQdisc(sock, ifindex_));
  if (root && root->handle != 0) {
    return AlreadyExists("'" + params_.dev + "' in '" + params_.netns + "' has a root qdisc " +
                         root->kind + " " + HandleString(root->handle) +
                         " that this fault would replace; refusing to touch it");
  }
  sock_.emplace(std::move(sock));
  return nlohmann::json{{"netns", params_.netns}, {"dev", params_.dev}};
}

Status NetemFault::Apply(MonoNs) { return AddNetem(*sock_, ifindex_, params_); }

Status NetemFault::Undo(const nlohmann::json& undo) {
  FL_ASSIGN_OR_RETURN(NlSock sock, NlSock::ConnectInNetns(undo.value("netns", "")));
  FL_ASSIGN_OR_RETURN(LinkState link, GetLink(sock, undo.value("dev", "")));
  Status st = DeleteRootQdisc(sock, link.ifindex, kFaultHandle);
  return st.code() == Code::kNotFound ? Status::Ok() : st;
}

Status NetemFault::Revert() {
  return Undo(nlohmann::json{{"netns", params_.netns}, {"dev", params_.dev}});
}

Result<nlohmann::json> NetemFault::Observe() {
  FL_ASSIGN_OR_RETURN(std::optional<QdiscInfo> root, GetRootQdisc(*sock_, ifindex_));
  bool in_effect = root && root->handle == kFaultHandle && root->kind == "netem";
  nlohmann::json out = {{"in_effect", in_effect}};
  out["root_qdisc"] = root ? root->ToJson() : nlohmann::json(nullptr);
  return out;
}

}  // namespace faultline
