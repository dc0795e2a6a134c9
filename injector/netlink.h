// Thin RAII wrappers over libnl-route for links and addresses.
//
// An NlSock is bound to the network namespace of the thread that connected it and keeps
// working there after the thread leaves. Not thread-safe: one NlSock per thread.
// Errors from libnl are turned into Status values (NlStatus) in one place.
#pragma once

#include <netlink/netlink.h>
#include <netlink/route/link.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace faultline {

// libnl error (negative NLE_* code) -> Status.
Status NlStatus(const std::string& what, int nl_err);

class NlSock final {
 public:
  // A connected NETLINK_ROUTE socket in the calling thread's namespace.
  static Result<NlSock> Connect(int protocol = NETLINK_ROUTE);
  // Same, bound to the named namespace (the thread returns to its own namespace).
  static Result<NlSock> ConnectInNetns(std::string_view netns, int protocol = NETLINK_ROUTE);
  NlSock(NlSock&& other) noexcept;
  NlSock& operator=(NlSock&& other) noexcept;
  NlSock(const NlSock&) = delete;
  NlSock& operator=(const NlSock&) = delete;
  ~NlSock();

  nl_sock* get() const { return sock_; }

 private:
  explicit NlSock(nl_sock* sock) : sock_(sock) {}
  nl_sock* sock_ = nullptr;
};

// The id under which the namespace `netns_fd` is known inside the namespace of `sock`
// (RTM_GETNSID); -1 when it has none assigned. Ids are per namespace, so this is how a veth's
// IFLA_LINK_NETNSID is matched to a named namespace without guessing.
Result<int> GetNsid(NlSock& sock, int netns_fd);

// A link as the kernel reports it now.
struct LinkState {
  int ifindex = 0;
  std::string name;
  unsigned flags = 0;         // IFF_* from the kernel
  bool admin_up = false;      // IFF_UP
  bool carrier = false;       // IFF_LOWER_UP
  bool running = false;       // IFF_RUNNING (operationally up)
  std::string operstate;      // "up", "down", "lowerlayerdown", ...
  std::string kind;           // "veth", "bridge", ... ("" for physical)
  int link_ifindex = 0;       // IFLA_LINK (the veth peer's ifindex), 0 when absent
  int32_t link_netnsid = -1;  // IFLA_LINK_NETNSID, -1 when the peer is in this namespace
  int master_ifindex = 0;
  // IFLA_CARRIER_CHANGES: the carrier's transitions (up and down) since the device was made;
  // a port that went down and came back between two looks shows here. 0 when not reported.
  uint32_t carrier_changes = 0;
};

Result<LinkState> GetLink(NlSock& sock, std::string_view name);
Result<LinkState> GetLinkByIndex(NlSock& sock, int ifindex);
// All links in the socket's namespace.
Result<std::vector<LinkState>> ListLinks(NlSock& sock);

// Sets or clears IFF_UP through rtnl_link_change.
Status SetLinkUp(NlSock& sock, std::string_view name, bool up);
// Creates a veth pair `name` <-> `peer`; the peer is moved into `peer_netns_fd` when >= 0.
Status CreateVeth(NlSock& sock, std::string_view name, std::string_view peer, int peer_netns_fd);
Status DeleteLink(NlSock& sock, std::string_view name);
// Moves a link into the namespace `netns_fd` (it disappears from this one).
Status MoveLinkToNetns(NlSock& sock, std::string_view name, int netns_fd);
// Enslaves `name` to `master` (a bridge); creates a bridge when asked.
Status CreateBridge(NlSock& sock, std::string_view name);
Status SetMaster(NlSock& sock, std::string_view name, std::string_view master);

// Addresses in "a.b.c.d/len" or "x::y/len" form.
Result<std::vector<std::string>> ListAddresses(NlSock& sock, int ifindex);
Status AddAddress(NlSock& sock, int ifindex, std::string_view cidr);

// Policy routing (IPv4), through rtnl_rule / rtnl_route.
// Adds the rule `from <src_cidr> lookup <table>` at `priority`. AlreadyExists when present.
Status AddSourceRule(NlSock& sock, std::string_view src_cidr, uint32_t table, uint32_t priority);
// Adds `<dst_cidr> dev <ifindex> scope link src <src>` to `table`. With `replace` an existing
// route of that prefix in the table is replaced (no error); otherwise AlreadyExists.
// Fails while the device is down: the kernel keeps no route through a down device and drops
// the ones it had (in every table) when the device goes down.
Status AddLinkRoute(NlSock& sock, std::string_view dst_cidr, int ifindex, std::string_view src,
                    uint32_t table, bool replace);
// Adds `unreachable <dst_cidr>` to `table`: a lookup that reaches it fails with ENETUNREACH.
Status AddUnreachableRoute(NlSock& sock, std::string_view dst_cidr, uint32_t table);

}  // namespace faultline
