#include "transport/factory.h"

#include "transport/tcp/link.h"
#include "transport/tcp/setup.h"
#include "transport/verbs/setup.h"

namespace ftccl::transport {

Result<std::vector<std::pair<net::Fd, net::Endpoint>>> OpenListeners(
    const std::vector<uint32_t>& rail_ips) {
  return tcp::OpenListeners(rail_ips);
}

Result<std::unique_ptr<engine::Engine>> Connect(
    const CommOptions& options, const BootstrapTable& table,
    std::vector<std::pair<net::Fd, net::Endpoint>> listeners,
    const std::vector<uint32_t>& rail_ips, Clock::time_point deadline) {
  std::vector<net::Fd> listen_fds;
  for (auto& l : listeners) listen_fds.push_back(std::move(l.first));
  auto mesh = tcp::ConnectMesh(options, table, listen_fds, rail_ips, deadline);
  if (!mesh.ok()) return mesh.status();
  std::vector<engine::InitialConn> conns;
  std::unique_ptr<Backend> backend;
  if (options.transport == "verbs") {
    std::vector<verbs::UpgradeConn> want;
    for (const tcp::MeshConn& c : mesh.value()) {
      verbs::UpgradeConn u;
      u.tcp_fd = c.fd.get();
      u.local_ip = rail_ips[c.rail];
      u.label = ConnLabel(c.peer, c.rail, c.channel);
      want.push_back(std::move(u));
    }
    auto links = verbs::Upgrade(want, options, deadline);
    if (!links.ok()) return links.status().WithContext("verbs transport");
    for (size_t i = 0; i < mesh->size(); ++i) {
      tcp::MeshConn& c = mesh.value()[i];
      // The QP carries everything now: the TCP socket closes with `mesh`.
      conns.push_back({std::move(links.value()[i]), c.peer, c.rail, c.channel, c.conn_port});
    }
    backend = std::make_unique<verbs::VerbsBackend>();
  } else {
    // Every path of the mesh, those not connected at init without a link (ConnectMesh's grace):
    // the engine starts them down and sets them up when they work.
    std::vector<bool> have(static_cast<size_t>(options.size) * table.num_rails *
                           options.channels_per_rail);
    auto slot = [&](int peer, int rail, int ch) {
      return (static_cast<size_t>(peer) * table.num_rails + rail) * options.channels_per_rail + ch;
    };
    for (tcp::MeshConn& c : mesh.value()) {
      have[slot(c.peer, c.rail, c.channel)] = true;
      conns.push_back(
          {std::make_unique<tcp::SocketLink>(std::move(c.fd)), c.peer, c.rail, c.channel,
           c.conn_port});
    }
    for (int peer = 0; peer < options.size; ++peer) {
      for (int rail = 0; rail < table.num_rails && peer != options.rank; ++rail) {
        for (int ch = 0; ch < options.channels_per_rail; ++ch) {
          if (!have[slot(peer, rail, ch)]) conns.push_back({nullptr, peer, rail, ch, 0});
        }
      }
    }
    // The listeners stay open: a higher rank whose connection broke connects again.
    auto b = tcp::TcpBackend::Create(options, table, std::move(listen_fds), rail_ips);
    if (!b.ok()) return b.status();
    backend = std::move(b.value());
  }
  return std::make_unique<engine::Engine>(options, table, std::move(backend), std::move(conns),
                                          rail_ips);
}

}  // namespace ftccl::transport
