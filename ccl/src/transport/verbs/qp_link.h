// The verbs backend: RC queue pairs as the byte streams (transport::Link) under the chunk
// protocol of the TCP transport. One QP per connection (peer x rail x channel), each with its
// own device context, protection domain, completion channel, CQ and one registered memory
// region holding its send and receive slots.
//
// Data path: Writev copies bytes into free send slots and posts a signalled SEND per slot; the
// slot is free again when its completion arrives. The receiver keeps twice as many receive
// slots posted; Read copies out of completed receives in order and reposts each one once it is
// drained. A sender that finds no posted receive is held back by RNR retries (rnr_retry = 7,
// unlimited), which is the flow control. A zero-length SEND with immediate data ends the stream.
//
// Errors: work completions with IBV_WC_RETRY_EXC_ERR, IBV_WC_RNR_RETRY_EXC_ERR or
// IBV_WC_WR_FLUSH_ERR, and the async event IBV_EVENT_PORT_ERR, mean the path is down: the link
// fails and the transport moves its unacknowledged chunks to the other paths. Every other
// failed completion or async event (QP/CQ/device fatal, protection or length errors) is fatal
// for the communicator.
//
// Setup (Upgrade) goes over the TCP connection already established for the same peer, rail and
// channel: both ends write their QP number, PSN, MTU and GID on every connection first, then read
// the peer's, move their QPs to RTS, and exchange one more byte so that neither sends before the
// other's QP is ready. The TCP connections are closed afterwards.
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

}  // namespace ftccl::transport::verbs
