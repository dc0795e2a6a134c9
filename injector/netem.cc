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

Status AddNetem(NlSock& sock, int ifindex, uint32_t parent, const NetemParams& p) {
  FL_ASSIGN_OR_RETURN(auto msg, BuildNetemAdd(ifindex, parent, p));
  int err = nl_send_sync(sock.get(), msg.release());  // frees the message
  if (err == -NLE_OBJ_NOTFOUND || err == -NLE_OPNOTSUPP) {
    return Unavailable(
        "the kernel has no netem qdisc (sch_netem, CONFIG_NET_SCH_NETEM is missing): '" + p.kind +
        "' faults need it");
  }
  if (err < 0) return NlStatus("add netem qdisc on " + ClassString(parent), err);
  return Status::Ok();
}

}  // namespace

void NlMsgDeleter::operator()(nl_msg* m) const { nlmsg_free(m); }

Result<std::unique_ptr<nl_msg, NlMsgDeleter>> BuildNetemAdd(int ifindex, uint32_t parent,
                                                            const NetemParams& p) {
  std::unique_ptr<rtnl_qdisc, QdiscDeleter> q(rtnl_qdisc_alloc());
  if (!q) return Internal("rtnl_qdisc_alloc failed");
  auto* tc = reinterpret_cast<rtnl_tc*>(q.get());
  rtnl_tc_set_ifindex(tc, ifindex);
  rtnl_tc_set_parent(tc, parent);
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
  nl_msg* raw = nullptr;
  err = rtnl_qdisc_build_add_request(q.get(), NLM_F_CREATE | NLM_F_EXCL, &raw);
  if (err < 0) return NlStatus("build netem request", err);
  return std::unique_ptr<nl_msg, NlMsgDeleter>(raw);
}

Result<uint32_t> PlanNetemParent(const std::vector<QdiscInfo>& qdiscs, const std::string& where) {
  const QdiscInfo* root = nullptr;
  for (const QdiscInfo& q : qdiscs) {
    if (q.is_root) root = &q;
  }
  if (root == nullptr || root->handle == 0) return uint32_t{TC_H_ROOT};
  std::string root_text = root->kind + " " + HandleString(root->handle);
  if (root->handle == kFaultHandle) {
    if (root->kind == "netem") {
      return AlreadyExists("a netem fault is already active on " + where);
    }
    return AlreadyExists(where + " has the root qdisc " + root_text +
                         " of a bandwidth fault; a netem fault cannot share the root with it "
                         "(they compose only under the runner's shaping tbf " +
                         HandleString(kShapingHandle) + "); refusing");
  }
  if (root->handle != kShapingHandle || root->kind != "tbf") {
    return AlreadyExists(where + " has a root qdisc " + root_text +
                         " that this fault would replace; refusing to touch it");
  }
  // The runner's tbf: the netem takes the place of its default child, which the kernel does
  // not show. A child it shows is a netem fault's or the user's.
  for (const QdiscInfo& q : qdiscs) {
    if (q.is_root || TC_H_MAJ(q.parent) != kShapingHandle) continue;
    if (q.handle == kFaultHandle && q.kind == "netem") {
      return AlreadyExists("a netem fault is already active on " + where);
    }
    return AlreadyExists(where + " has a qdisc " + q.kind + " " + HandleString(q.handle) +
                         " under the runner's tbf " + HandleString(kShapingHandle) +
                         " that this fault would replace; refusing to touch it");
  }
  return kShapingClass;
}

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
    st = AddNetem(*sock, 1 /* lo */, TC_H_ROOT, p);
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
  FL_ASSIGN_OR_RETURN(std::vector<QdiscInfo> qdiscs, ListQdiscs(sock, ifindex_));
  FL_ASSIGN_OR_RETURN(parent_,
                      PlanNetemParent(qdiscs, "'" + params_.dev + "' in '" + params_.netns + "'"));
  sock_.emplace(std::move(sock));
  nlohmann::json undo = {{"netns", params_.netns}, {"dev", params_.dev}};
  if (parent_ != TC_H_ROOT) undo["parent"] = parent_;
  return undo;
}

Status NetemFault::Apply(MonoNs) { return AddNetem(*sock_, ifindex_, parent_, params_); }

Status NetemFault::Undo(const nlohmann::json& undo) {
  uint32_t parent = TC_H_ROOT;
  if (undo.contains("parent")) {
    if (!undo["parent"].is_number_unsigned() || undo["parent"].get<uint64_t>() != kShapingClass) {
      return InvalidArgument("netem undo: parent must be " + std::to_string(kShapingClass) + " (" +
                             ClassString(kShapingClass) + "), got " + undo["parent"].dump());
    }
    parent = kShapingClass;
  }
  FL_ASSIGN_OR_RETURN(NlSock sock, NlSock::ConnectInNetns(undo.value("netns", "")));
  FL_ASSIGN_OR_RETURN(LinkState link, GetLink(sock, undo.value("dev", "")));
  if (parent == TC_H_ROOT) {
    Status st = DeleteRootQdisc(sock, link.ifindex, kFaultHandle);
    return st.code() == Code::kNotFound ? Status::Ok() : st;
  }
  Status st = DeleteChildQdisc(sock, link.ifindex, kShapingClass, kFaultHandle);
  if (!st.ok() && st.code() != Code::kNotFound) return st;
  // Also when ours was already gone: a crash may have fallen between the two steps, leaving
  // the tbf without a child (it would drop every packet).
  st = RestoreTbfDefaultChild(sock, link.ifindex, kShapingHandle);
  return st.code() == Code::kNotFound ? Status::Ok() : st;
}

Status NetemFault::Revert() {
  nlohmann::json undo = {{"netns", params_.netns}, {"dev", params_.dev}};
  if (parent_ != TC_H_ROOT) undo["parent"] = parent_;
  return Undo(undo);
}

Result<nlohmann::json> NetemFault::Observe() {
  FL_ASSIGN_OR_RETURN(std::vector<QdiscInfo> qdiscs, ListQdiscs(*sock_, ifindex_));
  const QdiscInfo* root = nullptr;
  const QdiscInfo* ours = nullptr;
  for (const QdiscInfo& q : qdiscs) {
    if (q.is_root) root = &q;
    if (q.handle == kFaultHandle && q.kind == "netem" && q.parent == parent_) ours = &q;
  }
  nlohmann::json out = {{"in_effect", ours != nullptr}, {"parent", ClassString(parent_)}};
  out["root_qdisc"] = root ? root->ToJson() : nlohmann::json(nullptr);
  if (parent_ != TC_H_ROOT) out["netem_qdisc"] = ours ? ours->ToJson() : nlohmann::json(nullptr);
  return out;
}

}  // namespace faultline
