// The TCP transport's verbs mode: setup of the QP links under its connections, and the fault
// hook's QP operations. Kept apart from transport.cc, which knows links only as byte streams.
#include <unistd.h>

#include <chrono>
#include <future>

#include "transport/tcp/transport.h"
#include "transport/verbs/qp_link.h"

namespace ftccl::transport::tcp {

Status TcpTransport::UpgradeToVerbs(Clock::time_point deadline) {
  std::vector<verbs::UpgradeConn> want;
  for (const Conn& c : conns_) {
    verbs::UpgradeConn u;
    u.tcp_fd = c.fd.get();
    u.local_ip = rail_ips_[c.rail];
    u.label = "rank " + std::to_string(c.peer) + " rail " + std::to_string(c.rail) + " channel " +
              std::to_string(c.channel);
    want.push_back(std::move(u));
  }
  auto links = verbs::Upgrade(want, options_, deadline);
  if (!links.ok()) return links.status().WithContext("verbs transport");
  for (size_t i = 0; i < conns_.size(); ++i) {
    Conn& c = conns_[i];
    c.link = std::move(links.value()[i]);
    c.fd = net::Fd(dup(c.link->fd()));  // closes the TCP socket: the QP carries everything now
    if (!c.fd.valid()) return ErrnoStatus("dup", errno);
  }
  return Status::Ok();
}

Status TcpTransport::RunOnProgress(std::function<Status()> fn) {
  if (!started_ || !thread_.joinable()) return InvalidArgument("the transport is not running");
  auto done = std::make_shared<std::promise<Status>>();
  auto result = done->get_future();
  Post([fn = std::move(fn), done] { done->set_value(fn()); });
  if (result.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    return Timeout("the progress thread did not run the request within 5 s");
  }
  return result.get();
}

Status TcpTransport::InjectQpError(int peer, int rail) {
  if (options_.transport != "verbs") {
    return InvalidArgument(
        "qp_error needs the verbs transport (FTCCL_TRANSPORT=verbs); this communicator uses " +
        options_.transport);
  }
  if (peer < 0 || peer >= size_ || peer == rank_ || rail < 0 || rail >= num_rails_) {
    return InvalidArgument("qp_error: no connection to rank " + std::to_string(peer) + " on rail " +
                           std::to_string(rail) + " (rank " + std::to_string(rank_) + " of " +
                           std::to_string(size_) + ", " + std::to_string(num_rails_) + " rails)");
  }
  return RunOnProgress([this, peer, rail]() -> Status {
    int n = 0;
    for (int ci : peers_[peer].conns) {
      Conn& c = conns_[ci];
      if (c.rail != rail || !c.alive || !c.link) continue;
      FTCCL_RETURN_IF_ERROR(c.link->ForceError());
      ++n;
    }
    if (n == 0) {
      return InvalidArgument("qp_error: no live QP to rank " + std::to_string(peer) + " on rail " +
                             std::to_string(rail));
    }
    return Status::Ok();
  });
}

Result<std::vector<std::string>> TcpTransport::QpStates(int peer, int rail) {
  if (options_.transport != "verbs")
    return InvalidArgument("this communicator uses the tcp transport: no QPs");
  if (peer < 0 || peer >= size_ || peer == rank_ || rail < 0 || rail >= num_rails_) {
    return InvalidArgument("no connection to rank " + std::to_string(peer) + " on rail " +
                           std::to_string(rail));
  }
  // Shared: a request that times out may still run later.
  auto out = std::make_shared<std::vector<std::string>>();
  Status st = RunOnProgress([this, peer, rail, out]() -> Status {
    for (int ci : peers_[peer].conns) {
      const Conn& c = conns_[ci];
      if (c.rail != rail) continue;
      std::string state = c.link ? c.link->State() : "closed";
      if (!c.alive) state += " (connection dropped)";
      out->push_back("channel " + std::to_string(c.channel) + ": " + state);
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return *out;
}

Result<PathFaultState> TcpTransport::InjectQpError(int peer, int rail, Deadline deadline) {
  (void)deadline;  // InjectQpError bounds its own wait on the progress thread
  if (options_.transport != "verbs") return Unsupported();
  FTCCL_RETURN_IF_ERROR(InjectQpError(peer, rail));
  PathFaultState s;
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  s.applied_ns = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  s.qp_state = FirstQpState(peer, rail);
  return s;
}

std::optional<std::string> TcpTransport::FirstQpState(int peer, int rail) {
  auto states = QpStates(peer, rail);
  if (!states.ok() || states->empty()) return std::nullopt;
  // "channel 0: ERR (connection dropped)" -> "ERR"
  const std::string& line = states->front();
  size_t from = line.find(": ");
  if (from == std::string::npos) return line;
  from += 2;
  return line.substr(from, line.find(' ', from) - from);
}

}  // namespace ftccl::transport::tcp
