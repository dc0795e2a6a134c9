#include "injector/qdisc.h"

#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>

namespace faultline {
namespace {

struct MsgDeleter {
  void operator()(nl_msg* m) const { nlmsg_free(m); }
};
using MsgPtr = std::unique_ptr<nl_msg, MsgDeleter>;

std::string ToHex(const void* data, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(digits[p[i] >> 4]);
    out.push_back(digits[p[i] & 15]);
  }
  return out;
}

bool FromHex(const std::string& hex, void* data, size_t n) {
  if (hex.size() != 2 * n) return false;
  auto* p = static_cast<unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    unsigned v;
    if (std::sscanf(hex.c_str() + 2 * i, "%2x", &v) != 1) return false;
    p[i] = static_cast<unsigned char>(v);
  }
  return true;
}

int ParseQdisc(nl_msg* msg, void* arg) {
  auto* out = static_cast<std::vector<QdiscInfo>*>(arg);
  nlmsghdr* nlh = nlmsg_hdr(msg);
  if (nlh->nlmsg_type != RTM_NEWQDISC) return NL_OK;
  auto* tcm = static_cast<tcmsg*>(nlmsg_data(nlh));
  nlattr* tb[TCA_MAX + 1];
  if (nlmsg_parse(nlh, sizeof(tcmsg), tb, TCA_MAX, nullptr) < 0) return NL_SKIP;
  QdiscInfo q;
  q.ifindex = tcm->tcm_ifindex;
  q.handle = tcm->tcm_handle;
  q.parent = tcm->tcm_parent;
  q.is_root = tcm->tcm_parent == TC_H_ROOT;
  if (tb[TCA_KIND]) q.kind = nla_get_string(tb[TCA_KIND]);
  if (q.kind == "tbf" && tb[TCA_OPTIONS]) {
    nlattr* opt[TCA_TBF_MAX + 1];
    if (nla_parse_nested(opt, TCA_TBF_MAX, tb[TCA_OPTIONS], nullptr) == 0) {
      if (opt[TCA_TBF_PARMS] && nla_len(opt[TCA_TBF_PARMS]) >= (int)sizeof(tc_tbf_qopt)) {
        tc_tbf_qopt qopt;
        std::memcpy(&qopt, nla_data(opt[TCA_TBF_PARMS]), sizeof(qopt));
        q.rate_bytes_per_s = qopt.rate.rate;
        q.limit_bytes = qopt.limit;
        q.buffer_ticks = qopt.buffer;
        q.tbf_qopt_hex = ToHex(&qopt, sizeof(qopt));
      }
      if (opt[TCA_TBF_RATE64]) {
        q.rate64 = nla_get_u64(opt[TCA_TBF_RATE64]);
        q.rate_bytes_per_s = std::max(q.rate_bytes_per_s, q.rate64);
      }
      if (opt[TCA_TBF_PRATE64]) q.prate64 = nla_get_u64(opt[TCA_TBF_PRATE64]);
    }
  }
  out->push_back(std::move(q));
  return NL_OK;
}

Status SendAndAck(NlSock& sock, nl_msg* msg, const std::string& what) {
  int err = nl_send_auto(sock.get(), msg);
  if (err < 0) return NlStatus(what, err);
  err = nl_wait_for_ack(sock.get());
  if (err < 0) return NlStatus(what, err);
  return Status::Ok();
}

Result<MsgPtr> NewQdiscMsg(int type, int flags, int ifindex, uint32_t handle,
                           uint32_t parent = TC_H_ROOT) {
  MsgPtr msg(nlmsg_alloc_simple(type, flags));
  if (!msg) return Internal("nlmsg_alloc_simple failed");
  tcmsg tcm{};
  tcm.tcm_family = AF_UNSPEC;
  tcm.tcm_ifindex = ifindex;
  tcm.tcm_handle = handle;
  tcm.tcm_parent = parent;
  if (nlmsg_append(msg.get(), &tcm, sizeof(tcm), NLMSG_ALIGNTO) < 0) {
    return Internal("nlmsg_append failed");
  }
  return msg;
}

Status PutTbf(nl_msg* msg, const tc_tbf_qopt& qopt, uint64_t rate64, uint64_t prate64,
              uint32_t burst) {
  if (nla_put_string(msg, TCA_KIND, "tbf") < 0) return Internal("nla_put TCA_KIND");
  nlattr* opts = nla_nest_start(msg, TCA_OPTIONS);
  if (opts == nullptr) return Internal("nla_nest_start");
  if (nla_put(msg, TCA_TBF_PARMS, sizeof(qopt), &qopt) < 0) return Internal("nla_put PARMS");
  if (rate64 != 0 && nla_put_u64(msg, TCA_TBF_RATE64, rate64) < 0) return Internal("RATE64");
  if (prate64 != 0 && nla_put_u64(msg, TCA_TBF_PRATE64, prate64) < 0) return Internal("PRATE64");
  if (burst != 0 && nla_put_u32(msg, TCA_TBF_BURST, burst) < 0) return Internal("BURST");
  nla_nest_end(msg, opts);
  return Status::Ok();
}

constexpr uint64_t kMinTbfBurstBytes = 64 * 1024 + 2 * 1514;

Status SendTbf(NlSock& sock, int flags, int ifindex, uint32_t handle, const TbfConfig& c,
               const std::string& what) {
  if (c.rate_bits_per_s < 8) return InvalidArgument("tbf rate must be at least 8 bit/s");
  uint64_t rate = c.rate_bits_per_s / 8;
  // The default bucket holds 4 ms at the rate, and never less than the largest packet a
  // qdisc sees: a GSO super-packet of 64 KiB payload plus its headers. A bucket smaller than
  // the packet at the head of the queue can never send it, and tbf re-segments packets only
  // at enqueue, so a change to a smaller bucket (a bandwidth fault on a shaped rail) would
  // strand the queue it already holds for good, SYNs behind it included.
  uint64_t burst = c.burst_bytes ? c.burst_bytes : std::max<uint64_t>(kMinTbfBurstBytes, rate / 250);
  burst = std::min<uint64_t>(burst, 0xFFFFFFFFu);
  uint64_t limit = c.limit_bytes ? c.limit_bytes : rate / 20 + burst;
  limit = std::min<uint64_t>(limit, 0xFFFFFFFFu);
  tc_tbf_qopt qopt{};
  qopt.rate.rate = static_cast<uint32_t>(std::min<uint64_t>(rate, 0xFFFFFFFFu));
  qopt.rate.linklayer = TC_LINKLAYER_ETHERNET;
  qopt.limit = static_cast<uint32_t>(limit);
  FL_ASSIGN_OR_RETURN(MsgPtr msg, NewQdiscMsg(RTM_NEWQDISC, flags, ifindex, handle));
  FL_RETURN_IF_ERROR(
      PutTbf(msg.get(), qopt, rate >= (1ULL << 32) ? rate : 0, 0, static_cast<uint32_t>(burst)));
  return SendAndAck(sock, msg.get(), what);
}

}  // namespace

nlohmann::json QdiscInfo::ToJson() const {
  nlohmann::json j = {{"kind", kind}, {"handle", HandleString(handle)}, {"root", is_root}};
  if (kind == "tbf") {
    j["rate_bps"] = rate_bytes_per_s * 8;
    j["limit_bytes"] = limit_bytes;
  }
  return j;
}

nlohmann::json QdiscInfo::ToUndoJson() const {
  return {{"kind", kind},
          {"handle", handle},
          {"tbf_qopt_hex", tbf_qopt_hex},
          {"rate64", rate64},
          {"prate64", prate64}};
}

Result<QdiscInfo> QdiscInfo::FromUndoJson(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("handle") || !j.contains("tbf_qopt_hex")) {
    return InvalidArgument("malformed saved qdisc: " + j.dump());
  }
  QdiscInfo q;
  q.kind = j.value("kind", "");
  q.handle = j.value("handle", 0u);
  q.is_root = true;
  q.tbf_qopt_hex = j.value("tbf_qopt_hex", "");
  q.rate64 = j.value("rate64", uint64_t{0});
  q.prate64 = j.value("prate64", uint64_t{0});
  return q;
}

std::string HandleString(uint32_t handle) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%x:", handle >> 16);
  return buf;
}

std::string ClassString(uint32_t classid) {
  if (classid == TC_H_ROOT) return "root";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%x:%x", classid >> 16, classid & 0xFFFF);
  return buf;
}

Result<std::vector<QdiscInfo>> ListQdiscs(NlSock& sock, int ifindex) {
  MsgPtr msg(nlmsg_alloc_simple(RTM_GETQDISC, NLM_F_DUMP));
  if (!msg) return Internal("nlmsg_alloc_simple failed");
  tcmsg tcm{};
  tcm.tcm_family = AF_UNSPEC;
  tcm.tcm_ifindex = ifindex;
  if (nlmsg_append(msg.get(), &tcm, sizeof(tcm), NLMSG_ALIGNTO) < 0) {
    return Internal("nlmsg_append failed");
  }
  int err = nl_send_auto(sock.get(), msg.get());
  if (err < 0) return NlStatus("dump qdiscs", err);
  std::vector<QdiscInfo> all;
  nl_cb* cb = nl_cb_clone(nl_socket_get_cb(sock.get()));
  if (cb == nullptr) return Internal("nl_cb_clone failed");
  nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, ParseQdisc, &all);
  err = nl_recvmsgs(sock.get(), cb);
  nl_cb_put(cb);
  if (err < 0) return NlStatus("dump qdiscs", err);
  std::vector<QdiscInfo> out;
  for (QdiscInfo& q : all) {
    if (q.ifindex == ifindex) out.push_back(std::move(q));
  }
  return out;
}

Result<std::optional<QdiscInfo>> GetRootQdisc(NlSock& sock, int ifindex) {
  FL_ASSIGN_OR_RETURN(std::vector<QdiscInfo> all, ListQdiscs(sock, ifindex));
  for (QdiscInfo& q : all) {
    if (q.is_root) return std::optional<QdiscInfo>(std::move(q));
  }
  return std::optional<QdiscInfo>();
}

Status CreateRootTbf(NlSock& sock, int ifindex, uint32_t handle, const TbfConfig& config) {
  return SendTbf(sock, NLM_F_CREATE | NLM_F_EXCL, ifindex, handle, config,
                 "create root tbf " + HandleString(handle));
}

Status ChangeRootTbf(NlSock& sock, int ifindex, uint32_t handle, const TbfConfig& config) {
  return SendTbf(sock, 0, ifindex, handle, config, "change root tbf " + HandleString(handle));
}

Status RestoreRootTbf(NlSock& sock, int ifindex, const QdiscInfo& before) {
  tc_tbf_qopt qopt;
  if (before.kind != "tbf" || !FromHex(before.tbf_qopt_hex, &qopt, sizeof(qopt))) {
    return InvalidArgument("no saved tbf parameters to restore");
  }
  FL_ASSIGN_OR_RETURN(MsgPtr msg, NewQdiscMsg(RTM_NEWQDISC, 0, ifindex, before.handle));
  FL_RETURN_IF_ERROR(PutTbf(msg.get(), qopt, before.rate64, before.prate64, 0));
  return SendAndAck(sock, msg.get(), "restore root tbf " + HandleString(before.handle));
}

Status DeleteRootQdisc(NlSock& sock, int ifindex, uint32_t handle) {
  FL_ASSIGN_OR_RETURN(std::optional<QdiscInfo> root, GetRootQdisc(sock, ifindex));
  if (!root || root->handle != handle) {
    return NotFound("no root qdisc " + HandleString(handle) + " on ifindex " +
                    std::to_string(ifindex));
  }
  FL_ASSIGN_OR_RETURN(MsgPtr msg, NewQdiscMsg(RTM_DELQDISC, 0, ifindex, handle));
  return SendAndAck(sock, msg.get(), "delete root qdisc " + HandleString(handle));
}

Status DeleteChildQdisc(NlSock& sock, int ifindex, uint32_t parent, uint32_t handle) {
  FL_ASSIGN_OR_RETURN(std::vector<QdiscInfo> all, ListQdiscs(sock, ifindex));
  bool present = std::any_of(all.begin(), all.end(), [&](const QdiscInfo& q) {
    return !q.is_root && q.parent == parent && q.handle == handle;
  });
  if (!present) {
    return NotFound("no qdisc " + HandleString(handle) + " on class " + ClassString(parent) +
                    " of ifindex " + std::to_string(ifindex));
  }
  FL_ASSIGN_OR_RETURN(MsgPtr msg, NewQdiscMsg(RTM_DELQDISC, 0, ifindex, handle, parent));
  return SendAndAck(sock, msg.get(),
                    "delete qdisc " + HandleString(handle) + " on " + ClassString(parent));
}

Status RestoreTbfDefaultChild(NlSock& sock, int ifindex, uint32_t handle) {
  FL_ASSIGN_OR_RETURN(std::vector<QdiscInfo> all, ListQdiscs(sock, ifindex));
  const QdiscInfo* root = nullptr;
  for (const QdiscInfo& q : all) {
    if (q.is_root) root = &q;
  }
  if (root == nullptr || root->handle != handle || root->kind != "tbf") {
    return NotFound("no root tbf " + HandleString(handle) + " on ifindex " +
                    std::to_string(ifindex));
  }
  // The default child is not in the dump (the kernel hides it); a shown one is a real child.
  for (const QdiscInfo& q : all) {
    if (!q.is_root && TC_H_MAJ(q.parent) == handle) return Status::Ok();
  }
  return RestoreRootTbf(sock, ifindex, *root);
}

}  // namespace faultline
