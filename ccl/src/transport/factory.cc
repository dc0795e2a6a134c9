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
    // A path not connected at init (ConnectMesh's grace) has no link: the engine starts it
    // down and sets it up when it works.
    for (tcp::MeshConn& c : mesh.value()) {
      std::unique_ptr<Link> link;
      if (c.fd.valid()) link = std::make_unique<tcp::SocketLink>(std::move(c.fd));
      conns.push_back({std::move(link), c.peer, c.rail, c.channel, c.conn_port});
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
