#include "transport/verbs/setup.h"

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "net.h"
#include "transport/verbs/link.h"

namespace ftccl::transport::verbs {

bool Built() { return true; }

std::string RailDevice::ToString() const {
  return device + " port " + std::to_string(port) + " gid " + std::to_string(gid_index);
}

Result<RailDevice> FindRailDevice(uint32_t ip) {
  uint8_t want[16] = {};
  want[10] = 0xff;
  want[11] = 0xff;
  std::memcpy(want + 12, &ip, 4);
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) {
    return InvalidArgument("no RDMA device for rail address " + IpString(ip) + " (ibv_get_device_list: " +
                           strerror(errno) + ")");
  }
  std::string seen;
  Result<RailDevice> found = InvalidArgument("");
  bool ok = false;
  for (int i = 0; i < n && !ok; ++i) {
    ibv_context* ctx = ibv_open_device(list[i]);
    if (ctx == nullptr) continue;
    const std::string name = ibv_get_device_name(list[i]);
    seen += (seen.empty() ? "" : ", ") + name;
    ibv_device_attr da{};
    if (ibv_query_device(ctx, &da) == 0) {
      for (int port = 1; port <= da.phys_port_cnt && !ok; ++port) {
        ibv_port_attr pa{};
        if (ibv_query_port(ctx, static_cast<uint8_t>(port), &pa) != 0) continue;
        for (int g = 0; g < pa.gid_tbl_len && !ok; ++g) {
          ibv_gid_entry e{};
          if (ibv_query_gid_ex(ctx, static_cast<uint32_t>(port), static_cast<uint32_t>(g), &e, 0) != 0) continue;
          if (e.gid_type != IBV_GID_TYPE_ROCE_V2 || std::memcmp(e.gid.raw, want, 16) != 0) continue;
          found = RailDevice{name, port, g, static_cast<int>(e.ndev_ifindex)};
          ok = true;
        }
      }
    }
    ibv_close_device(ctx);
  }
  ibv_free_device_list(list);
  if (ok) return found;
  return InvalidArgument("no RDMA device for rail address " + IpString(ip) +
                         ": no port has it as a RoCE v2 GID (devices: " + (seen.empty() ? "none" : seen) +
                         "); add one with `rdma link add NAME type rxe netdev DEV` or pick a rail on an RDMA port");
}

Result<std::vector<std::unique_ptr<Link>>> Upgrade(const std::vector<UpgradeConn>& conns,
                                                   const CommOptions& options,
                                                   Clock::time_point deadline) {
  std::map<uint32_t, RailDevice> devices;
  std::vector<std::unique_ptr<QpLink>> links;
  for (const auto& c : conns) {
    auto it = devices.find(c.local_ip);
    if (it == devices.end()) {
      auto d = FindRailDevice(c.local_ip);
      if (!d.ok()) return d.status();
      it = devices.emplace(c.local_ip, d.value()).first;
    }
    auto link = std::make_unique<QpLink>();
    Status st = link->Init(it->second, c.label);
    if (!st.ok()) return st.WithContext(c.label + " on " + it->second.ToString());
    links.push_back(std::move(link));
  }
  // Writes first on every connection, then reads: no order between peers can deadlock.
  for (size_t i = 0; i < conns.size(); ++i) {
    WireInfo w = links[i]->LocalInfo();
    Status st = net::WriteFull(conns[i].tcp_fd, &w, sizeof(w), deadline);
    if (!st.ok()) return st.WithContext("sending the QP address to " + conns[i].label);
  }
  for (size_t i = 0; i < conns.size(); ++i) {
    WireInfo w{};
    Status st = net::ReadFull(conns[i].tcp_fd, &w, sizeof(w), deadline);
    if (!st.ok()) return st.WithContext("reading the QP address of " + conns[i].label);
    if (w.magic != kInfoMagic) {
      return Corrupt("unexpected QP address from " + conns[i].label +
                     " (the peer does not use the verbs transport?)");
    }
    st = links[i]->Connect(w, options);
    if (!st.ok()) return st.WithContext(conns[i].label);
  }
  const uint8_t ready = 1;
  for (size_t i = 0; i < conns.size(); ++i) {
    Status st = net::WriteFull(conns[i].tcp_fd, &ready, 1, deadline);
    if (!st.ok()) return st.WithContext("telling " + conns[i].label + " that the QP is ready");
  }
  for (size_t i = 0; i < conns.size(); ++i) {
    uint8_t b = 0;
    Status st = net::ReadFull(conns[i].tcp_fd, &b, 1, deadline);
    if (!st.ok()) return st.WithContext("waiting for the QP of " + conns[i].label);
  }
  std::vector<std::unique_ptr<Link>> out;
  for (auto& l : links) out.push_back(std::move(l));
  return out;
}

}  // namespace ftccl::transport::verbs
