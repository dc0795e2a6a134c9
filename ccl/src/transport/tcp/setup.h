// Connection setup of the TCP backend: the listeners (one per rail, opened before bootstrap so
// their ports can be exchanged), the initial mesh of `channels_per_rail` connections per peer
// per rail, and TcpBackend, the transport::Backend that redials broken connections, accepts
// the redials of higher ranks and serves and opens intra-host relays (relay.h).
//
// Every data connection starts with a hello frame from its connecting end (wire.h: root = its
// rank, tag = rail << 16 | channel); the higher rank of a pair connects.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "bootstrap.h"
#include "net.h"
#include "transport/backend.h"
#include "transport/tcp/relay.h"

namespace ftccl::transport::tcp {

// Socket options of every data connection: TCP_NODELAY, the buffer sizes and
// TCP_USER_TIMEOUT from the options.
Status ApplySocketOptions(int fd, const CommOptions& o);

// The port of a connection's connecting end (its local port there, its peer's port at the
// accepting end): the same number at both ends, and different for every connection.
uint16_t ConnectorPort(int fd, bool i_connected);

// One listener per rail on the given local addresses (network byte order, ephemeral ports).
Result<std::vector<std::pair<net::Fd, net::Endpoint>>> OpenListeners(
    const std::vector<uint32_t>& rail_ips);

// A data connection of the initial mesh.
struct MeshConn {
  net::Fd fd;  // connected, non-blocking, socket options applied; invalid: not connected
  int peer = -1;
  int rail = 0;
  int channel = 0;
  uint16_t conn_port = 0;
};

// Establishes the connections of the mesh before `deadline`: this rank connects to every lower
// rank on every rail and channel, from its own rail address, and accepts the connections of
// every higher rank on `listeners` (by rail), all at once. Returns when all are up or, with
// options.init_path_grace > 0 over TCP, once every peer has at least one and the grace has
// passed since (a rail down at start). Returns every path; those not connected (no fd) are the
// engine's to set up when they work. Fails at `deadline` naming a missing connection, and at once
// on a refused connection (the peer's process is gone) or a foreign or corrupt hello.
Result<std::vector<MeshConn>> ConnectMesh(const CommOptions& options, const BootstrapTable& table,
                                          const std::vector<net::Fd>& listeners,
                                          const std::vector<uint32_t>& rail_ips,
                                          Clock::time_point deadline);

class TcpBackend final : public Backend {
 public:
  // Keeps `listeners` (by rail) open for the redials of higher ranks.
  static Result<std::unique_ptr<TcpBackend>> Create(const CommOptions& options,
                                                    const BootstrapTable& table,
                                                    std::vector<net::Fd> listeners,
                                                    const std::vector<uint32_t>& rail_ips);
  ~TcpBackend() override;
  TcpBackend(const TcpBackend&) = delete;
  TcpBackend& operator=(const TcpBackend&) = delete;

  const char* name() const override { return "tcp"; }
  const char* log_tag() const override { return "NET/TCP"; }
  bool redials() const override { return true; }
  bool announces_failures() const override { return false; }
  bool relays() const override { return true; }
  bool queue_pairs() const override { return false; }

  int setup_fd() const override { return epoll_.get(); }
  std::vector<SetupEvent> Poll(Clock::time_point now) override;

  Status StartDial(int slot, int peer, int rail, const wire::FrameHeader& hello,
                   Clock::time_point deadline) override;
  void CancelDial(int slot) override;
  bool dialing(int slot) const override { return dials_.count(slot) > 0; }

  Status ServeRelays(RelayHooks hooks) override;
  Result<std::unique_ptr<Link>> DialRelay(int via, int dst, const wire::FrameHeader& hello) override;
  void StopRelays(std::chrono::milliseconds grace) override;
  uint64_t relay_bytes_forwarded() const override;

 private:
  struct Dial {
    net::Fd fd;
    wire::FrameHeader hello;
    Clock::time_point deadline;
  };
  // An accepted connection whose hello has not arrived yet.
  struct Pending {
    net::Fd fd;
    int rail = 0;  // the listener's rail; -1: a Unix socket from a rank of this host (relay)
    wire::FrameHeader hello;
    size_t got = 0;
    Clock::time_point deadline;
  };

  TcpBackend(const CommOptions& options, const BootstrapTable& table,
             const std::vector<uint32_t>& rail_ips);
  void OnDialDone(int slot, std::vector<SetupEvent>* out);
  void OnAccept(int rail, Clock::time_point now);
  void AddPending(net::Fd fd, int rail, Clock::time_point now);
  void OnPendingReadable(uint64_t id, std::vector<SetupEvent>* out);

  const CommOptions options_;
  const int rank_;
  const uint64_t comm_id_;
  std::vector<uint32_t> rail_ips_;                    // by rail, network byte order
  std::vector<std::vector<net::Endpoint>> peer_eps_;  // [peer][rail]: its data listener
  std::vector<uint64_t> hosts_;                       // host key by rank
  std::vector<net::Fd> listeners_;                    // by rail
  net::Fd epoll_;                                     // setup_fd()
  net::Fd inbox_wake_;                                // relays handed over by the service
  std::map<int, Dial> dials_;                         // by slot
  std::map<uint64_t, Pending> pending_;
  uint64_t next_pending_ = 0;
  std::mutex inbox_mu_;
  std::vector<net::Fd> inbox_;  // Unix sockets of relays for this rank, from the service thread
  std::unique_ptr<RelayService> relay_service_;
};

}  // namespace ftccl::transport::tcp
