#include "injector/netlink.h"

#include <linux/fib_rules.h>
#include <linux/if.h>
#include <linux/net_namespace.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/route/addr.h>
#include <netlink/route/link/bridge.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/route.h>
#include <netlink/route/rule.h>

#include <memory>

#include "injector/netns.h"

namespace faultline {
namespace {

struct LinkDeleter {
  void operator()(rtnl_link* l) const { rtnl_link_put(l); }
};
using LinkPtr = std::unique_ptr<rtnl_link, LinkDeleter>;
struct CacheDeleter {
  void operator()(nl_cache* c) const { nl_cache_free(c); }
};
using CachePtr = std::unique_ptr<nl_cache, CacheDeleter>;
struct AddrDeleter {
  void operator()(rtnl_addr* a) const { rtnl_addr_put(a); }
};
struct NlAddrDeleter {
  void operator()(nl_addr* a) const { nl_addr_put(a); }
};

LinkState ToState(rtnl_link* link) {
  LinkState s;
  s.ifindex = rtnl_link_get_ifindex(link);
  const char* name = rtnl_link_get_name(link);
  s.name = name ? name : "";
  s.flags = rtnl_link_get_flags(link);
  s.admin_up = (s.flags & IFF_UP) != 0;
  s.carrier = (s.flags & IFF_LOWER_UP) != 0;
  s.running = (s.flags & IFF_RUNNING) != 0;
  char buf[64];
  s.operstate = rtnl_link_operstate2str(rtnl_link_get_operstate(link), buf, sizeof(buf));
  const char* kind = rtnl_link_get_type(link);
  s.kind = kind ? kind : "";
  s.link_ifindex = rtnl_link_get_link(link);
  int32_t nsid = -1;
  if (rtnl_link_get_link_netnsid(link, &nsid) != 0) nsid = -1;
  s.link_netnsid = nsid;
  s.master_ifindex = rtnl_link_get_master(link);
  uint32_t changes = 0;
  if (rtnl_link_get_carrier_changes(link, &changes) == 0) s.carrier_changes = changes;
  return s;
}

Result<LinkPtr> FetchLink(NlSock& sock, int ifindex, std::string_view name) {
  rtnl_link* link = nullptr;
  std::string n(name);
  int err = rtnl_link_get_kernel(sock.get(), ifindex, ifindex ? nullptr : n.c_str(), &link);
  if (err < 0) {
    if (err == -NLE_OBJ_NOTFOUND || err == -NLE_NODEV) {
      return NotFound(ifindex ? "no interface with index " + std::to_string(ifindex)
                              : "no interface named '" + n + "'");
    }
    return NlStatus(ifindex ? "get link " + std::to_string(ifindex) : "get link " + n, err);
  }
  return LinkPtr(link);
}

}  // namespace

Status NlStatus(const std::string& what, int nl_err) {
  int e = nl_err < 0 ? -nl_err : nl_err;
  std::string msg = what + ": " + nl_geterror(e);
  switch (e) {
    case NLE_OBJ_NOTFOUND:
    case NLE_NODEV:
      return NotFound(msg);
    case NLE_EXIST:
      return AlreadyExists(msg);
    case NLE_PERM:
      return PermissionDenied(msg);
    case NLE_OPNOTSUPP:
      return Unavailable(msg);
    case NLE_INVAL:
    case NLE_RANGE:
      return InvalidArgument(msg);
    default:
      return KernelError(msg);
  }
}

Result<NlSock> NlSock::Connect(int protocol) {
  nl_sock* s = nl_socket_alloc();
  if (s == nullptr) return Internal("nl_socket_alloc failed");
  int err = nl_connect(s, protocol);
  if (err < 0) {
    nl_socket_free(s);
    return NlStatus("nl_connect", err);
  }
  return NlSock(s);
}

Result<NlSock> NlSock::ConnectInNetns(std::string_view netns, int protocol) {
  FL_ASSIGN_OR_RETURN(ScopedNetns in, ScopedNetns::Enter(netns));
  return Connect(protocol);
}

NlSock::NlSock(NlSock&& other) noexcept : sock_(other.sock_) { other.sock_ = nullptr; }

NlSock& NlSock::operator=(NlSock&& other) noexcept {
  if (this != &other) {
    if (sock_) nl_socket_free(sock_);
    sock_ = other.sock_;
    other.sock_ = nullptr;
  }
  return *this;
}

NlSock::~NlSock() {
  if (sock_) nl_socket_free(sock_);
}

Result<LinkState> GetLink(NlSock& sock, std::string_view name) {
  FL_ASSIGN_OR_RETURN(LinkPtr link, FetchLink(sock, 0, name));
  return ToState(link.get());
}

Result<LinkState> GetLinkByIndex(NlSock& sock, int ifindex) {
  FL_ASSIGN_OR_RETURN(LinkPtr link, FetchLink(sock, ifindex, ""));
  return ToState(link.get());
}

Result<std::vector<LinkState>> ListLinks(NlSock& sock) {
  nl_cache* cache = nullptr;
  int err = rtnl_link_alloc_cache(sock.get(), AF_UNSPEC, &cache);
  if (err < 0) return NlStatus("dump links", err);
  CachePtr owned(cache);
  std::vector<LinkState> out;
  for (nl_object* o = nl_cache_get_first(cache); o != nullptr; o = nl_cache_get_next(o)) {
    out.push_back(ToState(reinterpret_cast<rtnl_link*>(o)));
  }
  return out;
}

Status SetLinkUp(NlSock& sock, std::string_view name, bool up) {
  FL_ASSIGN_OR_RETURN(LinkPtr orig, FetchLink(sock, 0, name));
  LinkPtr change(rtnl_link_alloc());
  if (!change) return Internal("rtnl_link_alloc failed");
  if (up) {
    rtnl_link_set_flags(change.get(), IFF_UP);
  } else {
    rtnl_link_unset_flags(change.get(), IFF_UP);
  }
  int err = rtnl_link_change(sock.get(), orig.get(), change.get(), 0);
  if (err < 0)
    return NlStatus(std::string("set ") + std::string(name) + (up ? " up" : " down"), err);
  return Status::Ok();
}

Status CreateVeth(NlSock& sock, std::string_view name, std::string_view peer_name,
                  int peer_netns_fd) {
  LinkPtr link(rtnl_link_veth_alloc());
  if (!link) return Internal("rtnl_link_veth_alloc failed");
  std::string n(name), p(peer_name);
  rtnl_link_set_name(link.get(), n.c_str());
  rtnl_link* peer = rtnl_link_veth_get_peer(link.get());
  rtnl_link_set_name(peer, p.c_str());
  if (peer_netns_fd >= 0) rtnl_link_set_ns_fd(peer, peer_netns_fd);
  rtnl_link_put(peer);
  int err = rtnl_link_add(sock.get(), link.get(), NLM_F_CREATE | NLM_F_EXCL);
  if (err < 0) return NlStatus("create veth " + n + " <-> " + p, err);
  return Status::Ok();
}

Status DeleteLink(NlSock& sock, std::string_view name) {
  FL_ASSIGN_OR_RETURN(LinkPtr link, FetchLink(sock, 0, name));
  int err = rtnl_link_delete(sock.get(), link.get());
  if (err < 0) return NlStatus("delete link " + std::string(name), err);
  return Status::Ok();
}

Status MoveLinkToNetns(NlSock& sock, std::string_view name, int netns_fd) {
  FL_ASSIGN_OR_RETURN(LinkPtr orig, FetchLink(sock, 0, name));
  LinkPtr change(rtnl_link_alloc());
  if (!change) return Internal("rtnl_link_alloc failed");
  rtnl_link_set_ns_fd(change.get(), netns_fd);
  int err = rtnl_link_change(sock.get(), orig.get(), change.get(), 0);
  if (err < 0) return NlStatus("move link " + std::string(name) + " to another namespace", err);
  return Status::Ok();
}

Status CreateBridge(NlSock& sock, std::string_view name) {
  LinkPtr link(rtnl_link_bridge_alloc());
  if (!link) return Internal("rtnl_link_bridge_alloc failed");
  std::string n(name);
  rtnl_link_set_name(link.get(), n.c_str());
  int err = rtnl_link_add(sock.get(), link.get(), NLM_F_CREATE | NLM_F_EXCL);
  if (err < 0) return NlStatus("create bridge " + n, err);
  return Status::Ok();
}

Status SetMaster(NlSock& sock, std::string_view name, std::string_view master) {
  FL_ASSIGN_OR_RETURN(LinkPtr orig, FetchLink(sock, 0, name));
  FL_ASSIGN_OR_RETURN(LinkPtr m, FetchLink(sock, 0, master));
  LinkPtr change(rtnl_link_alloc());
  if (!change) return Internal("rtnl_link_alloc failed");
  rtnl_link_set_master(change.get(), rtnl_link_get_ifindex(m.get()));
  int err = rtnl_link_change(sock.get(), orig.get(), change.get(), 0);
  if (err < 0) return NlStatus("enslave " + std::string(name) + " to " + std::string(master), err);
  return Status::Ok();
}

Result<std::vector<std::string>> ListAddresses(NlSock& sock, int ifindex) {
  nl_cache* cache = nullptr;
  int err = rtnl_addr_alloc_cache(sock.get(), &cache);
  if (err < 0) return NlStatus("dump addresses", err);
  CachePtr owned(cache);
  std::vector<std::string> out;
  for (nl_object* o = nl_cache_get_first(cache); o != nullptr; o = nl_cache_get_next(o)) {
    auto* a = reinterpret_cast<rtnl_addr*>(o);
    if (rtnl_addr_get_ifindex(a) != ifindex) continue;
    nl_addr* local = rtnl_addr_get_local(a);
    if (local == nullptr) continue;
    // Skip kernel-generated IPv6 link-local addresses: they come back by themselves.
    if (rtnl_addr_get_family(a) == AF_INET6 && rtnl_addr_get_scope(a) == 253) continue;
    char buf[128];
    nl_addr2str(local, buf, sizeof(buf));
    std::string s(buf);
    if (s.find('/') == std::string::npos) {
      s.push_back('/');
      s.append(std::to_string(rtnl_addr_get_prefixlen(a)));
    }
    out.push_back(s);
  }
  return out;
}

Status AddAddress(NlSock& sock, int ifindex, std::string_view cidr) {
  std::string c(cidr);
  nl_addr* local = nullptr;
  int err = nl_addr_parse(c.c_str(), AF_UNSPEC, &local);
  if (err < 0) return InvalidArgument("malformed address '" + c + "'");
  std::unique_ptr<nl_addr, NlAddrDeleter> local_owned(local);
  std::unique_ptr<rtnl_addr, AddrDeleter> addr(rtnl_addr_alloc());
  if (!addr) return Internal("rtnl_addr_alloc failed");
  rtnl_addr_set_ifindex(addr.get(), ifindex);
  rtnl_addr_set_family(addr.get(), nl_addr_get_family(local));
  err = rtnl_addr_set_local(addr.get(), local);
  if (err < 0) return NlStatus("set address " + c, err);
  rtnl_addr_set_prefixlen(addr.get(), nl_addr_get_prefixlen(local));
  err = rtnl_addr_add(sock.get(), addr.get(), 0);
  if (err < 0) return NlStatus("add address " + c, err);
  return Status::Ok();
}

}  // namespace faultline

namespace faultline {
namespace {

int ParseNsid(nl_msg* msg, void* arg) {
  auto* out = static_cast<int*>(arg);
  nlmsghdr* h = nlmsg_hdr(msg);
  if (h->nlmsg_type != RTM_NEWNSID) return NL_SKIP;
  nlattr* tb[NETNSA_MAX + 1];
  if (nlmsg_parse(h, sizeof(rtgenmsg), tb, NETNSA_MAX, nullptr) < 0) return NL_SKIP;
  if (tb[NETNSA_NSID]) *out = static_cast<int>(nla_get_s32(tb[NETNSA_NSID]));
  return NL_OK;
}

}  // namespace

Result<int> GetNsid(NlSock& sock, int netns_fd) {
  nl_msg* msg = nlmsg_alloc_simple(RTM_GETNSID, NLM_F_REQUEST);
  if (msg == nullptr) return Status(Code::kInternal, "nlmsg_alloc_simple failed");
  rtgenmsg g{};
  g.rtgen_family = AF_UNSPEC;
  int id = -1;
  int err = nlmsg_append(msg, &g, sizeof(g), NLMSG_ALIGNTO);
  if (err >= 0) err = nla_put_u32(msg, NETNSA_FD, static_cast<uint32_t>(netns_fd));
  // No automatic ACK: the kernel answers with exactly one RTM_NEWNSID, and an ACK left behind
  // in the socket would be read as the answer to the next request.
  nl_socket_disable_auto_ack(sock.get());
  if (err >= 0) err = nl_send_auto(sock.get(), msg);
  nlmsg_free(msg);
  if (err < 0) nl_socket_enable_auto_ack(sock.get());
  if (err < 0) return Status(Code::kKernel, std::string("RTM_GETNSID: ") + nl_geterror(err));
  nl_cb* cb = nl_cb_clone(nl_socket_get_cb(sock.get()));
  nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, ParseNsid, &id);
  err = nl_recvmsgs(sock.get(), cb);
  nl_cb_put(cb);
  nl_socket_enable_auto_ack(sock.get());
  if (err < 0) return Status(Code::kKernel, std::string("RTM_GETNSID reply: ") + nl_geterror(err));
  return id;
}

}  // namespace faultline

namespace faultline {
namespace {

struct RuleDeleter {
  void operator()(rtnl_rule* r) const { rtnl_rule_put(r); }
};
struct RouteDeleter {
  void operator()(rtnl_route* r) const { rtnl_route_put(r); }
};
using NlAddrPtr = std::unique_ptr<nl_addr, NlAddrDeleter>;

Result<NlAddrPtr> ParseV4(std::string_view text) {
  std::string t(text);
  nl_addr* a = nullptr;
  if (nl_addr_parse(t.c_str(), AF_INET, &a) < 0) {
    return InvalidArgument("malformed IPv4 address '" + t + "'");
  }
  return NlAddrPtr(a);
}

using RoutePtr = std::unique_ptr<rtnl_route, RouteDeleter>;

Result<RoutePtr> NewRoute(std::string_view dst_cidr, uint32_t table, uint8_t type) {
  FL_ASSIGN_OR_RETURN(NlAddrPtr dst, ParseV4(dst_cidr));
  RoutePtr route(rtnl_route_alloc());
  if (!route) return Internal("rtnl_route_alloc failed");
  rtnl_route_set_family(route.get(), AF_INET);
  int err = rtnl_route_set_dst(route.get(), dst.get());
  if (err < 0) return NlStatus("route destination " + std::string(dst_cidr), err);
  rtnl_route_set_table(route.get(), table);
  rtnl_route_set_type(route.get(), type);
  rtnl_route_set_protocol(route.get(), RTPROT_STATIC);
  return route;
}

}  // namespace

Status AddSourceRule(NlSock& sock, std::string_view src_cidr, uint32_t table, uint32_t priority) {
  FL_ASSIGN_OR_RETURN(NlAddrPtr src, ParseV4(src_cidr));
  std::unique_ptr<rtnl_rule, RuleDeleter> rule(rtnl_rule_alloc());
  if (!rule) return Internal("rtnl_rule_alloc failed");
  rtnl_rule_set_family(rule.get(), AF_INET);
  int err = rtnl_rule_set_src(rule.get(), src.get());
  if (err < 0) return NlStatus("rule source " + std::string(src_cidr), err);
  rtnl_rule_set_table(rule.get(), table);
  rtnl_rule_set_prio(rule.get(), priority);
  rtnl_rule_set_action(rule.get(), FR_ACT_TO_TBL);
  err = rtnl_rule_add(sock.get(), rule.get(), NLM_F_EXCL);
  if (err < 0) {
    return NlStatus("add rule from " + std::string(src_cidr) + " lookup " + std::to_string(table),
                    err);
  }
  return Status::Ok();
}

Status AddLinkRoute(NlSock& sock, std::string_view dst_cidr, int ifindex, std::string_view src,
                    uint32_t table, bool replace) {
  FL_ASSIGN_OR_RETURN(RoutePtr route, NewRoute(dst_cidr, table, RTN_UNICAST));
  FL_ASSIGN_OR_RETURN(NlAddrPtr pref_src, ParseV4(src));
  int err = rtnl_route_set_pref_src(route.get(), pref_src.get());
  if (err < 0) return NlStatus("route source " + std::string(src), err);
  rtnl_route_set_scope(route.get(), RT_SCOPE_LINK);
  rtnl_nexthop* nh = rtnl_route_nh_alloc();
  if (nh == nullptr) return Internal("rtnl_route_nh_alloc failed");
  rtnl_route_nh_set_ifindex(nh, ifindex);
  rtnl_route_add_nexthop(route.get(), nh);  // the route owns it now
  err = rtnl_route_add(sock.get(), route.get(), replace ? NLM_F_REPLACE : NLM_F_EXCL);
  if (err < 0) {
    return NlStatus("add route " + std::string(dst_cidr) + " dev #" + std::to_string(ifindex) +
                        " table " + std::to_string(table),
                    err);
  }
  return Status::Ok();
}

Status AddUnreachableRoute(NlSock& sock, std::string_view dst_cidr, uint32_t table) {
  FL_ASSIGN_OR_RETURN(RoutePtr route, NewRoute(dst_cidr, table, RTN_UNREACHABLE));
  rtnl_route_set_scope(route.get(), RT_SCOPE_UNIVERSE);
  int err = rtnl_route_add(sock.get(), route.get(), NLM_F_EXCL);
  if (err < 0) {
    return NlStatus(
        "add unreachable route " + std::string(dst_cidr) + " table " + std::to_string(table), err);
  }
  return Status::Ok();
}

}  // namespace faultline
