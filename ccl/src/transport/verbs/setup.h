// Connection setup of the verbs backend: RC queue pairs (link.h) under the connections of
// the chunk engine, one per connection (peer x rail x channel).
//
// Setup (Upgrade) goes over the TCP connection the factory established for the same peer, rail
// and channel (tcp/setup.h, ConnectMesh): both ends write their QP number, PSN, MTU and GID on
// every connection first, then read the peer's, move their QPs to RTS, and exchange one more
// byte so that neither sends before the other's QP is ready. The TCP connections are closed
// afterwards. A failed QP is not recreated (VerbsBackend::redials() is false): its chunks move
// to the other rails, as for any path that is down.
//
// Device choice per rail: the device and port whose GID table holds the rail address as a
// RoCE v2 IPv4-mapped GID (::ffff:a.b.c.d); that GID is the source GID of the rail's QPs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ftccl/communicator.h"
#include "ftccl/status.h"
#include "transport/backend.h"
#include "transport/link.h"

namespace ftccl::transport::verbs {

// Whether this build of ftccl has the verbs backend (libibverbs was found at build time).
bool Built();

// Where a rail address lives: "rxe0 port 1 gid 1".
struct RailDevice {
  std::string device;
  int port = 0;
  int gid_index = -1;
  int ifindex = 0;  // the netdev under the GID (RoCE), 0 when unknown
  std::string ToString() const;
};
// Finds the RDMA device, port and RoCE v2 GID index of `ip` (network byte order). Fails with
// kInvalidArgument when no device carries the address (or verbs was not built).
Result<RailDevice> FindRailDevice(uint32_t ip);

// One connection to upgrade: its established, connected TCP socket and the local rail address.
struct UpgradeConn {
  int tcp_fd = -1;
  uint32_t local_ip = 0;  // network byte order
  std::string label;      // "rank 1 rail 0 channel 0", for errors
};

// Creates one RC QP link per connection and connects each to the peer's over its TCP socket
// (see above), before `deadline`. Links come back in the order of `conns`; the sockets are left
// open for the caller to close. REQUIRES: the peer runs Upgrade on the same connections.
Result<std::vector<std::unique_ptr<Link>>> Upgrade(const std::vector<UpgradeConn>& conns,
                                                   const CommOptions& options,
                                                   Clock::time_point deadline);

// The verbs backend as the engine sees it: logs as NET/IB, never redials (the mesh is set up
// once), tells the peer when a QP fails (its end may stay up until it sends), serves no relays
// (the relay is a byte stream over sockets).
class VerbsBackend final : public Backend {
 public:
  const char* name() const override { return "verbs"; }
  const char* log_tag() const override { return "NET/IB"; }
  bool redials() const override { return false; }
  bool announces_failures() const override { return true; }
  bool relays() const override { return false; }
  bool queue_pairs() const override { return true; }
  int setup_fd() const override { return -1; }
  std::vector<SetupEvent> Poll(Clock::time_point) override { return {}; }
  Status StartDial(int, int, int, const wire::FrameHeader&, Clock::time_point) override {
    return InvalidArgument("the verbs transport does not redial");
  }
  void CancelDial(int) override {}
  bool dialing(int) const override { return false; }
  Status ServeRelays(RelayHooks) override {
    return InvalidArgument("the verbs transport serves no relays");
  }
  Result<std::unique_ptr<Link>> DialRelay(int, int, const wire::FrameHeader&) override {
    return InvalidArgument("the verbs transport opens no relays");
  }
  void StopRelays(std::chrono::milliseconds) override {}
  uint64_t relay_bytes_forwarded() const override { return 0; }
};

}  // namespace ftccl::transport::verbs
