// Intra-host relay service: every rank of a communicator serves the other ranks of its host
// (same host name and network namespace) on an abstract Unix socket. A rank whose own rails
// are all down connects to a neighbour's service and sends a RelayRequest naming the
// destination rank:
// - destination == the neighbour itself: the Unix socket becomes the path (handed to the
//   neighbour's progress thread, which reads the hello that follows);
// - otherwise the neighbour connects to the destination's listener from one of its own rails
//   that is up (the first that accepts, in rail order from a per-pair start) and copies bytes
//   both ways between the two sockets until either side ends.
// The relay does not look into the stream: the chunk protocol (hello, data, acknowledgements,
// probes) runs end to end, so a relayed path is as lossless as any other and its failure is
// detected the same way.
//
// Thread-safe: Start spawns one thread; the destructor stops it (closing every session).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "net.h"

namespace ftccl::transport::tcp {

// What a rank sends first on a relay connection (host byte order; the neighbour runs on the
// same host).
struct RelayRequest {
  static constexpr uint32_t kMagic = 0x59454C52;  // "RLEY"
  uint32_t magic = kMagic;
  uint32_t version = 1;
  uint64_t comm_id = 0;
  int32_t src = -1;  // the rank asking
  int32_t dst = -1;  // the rank its traffic is for
  uint32_t pad = 0;
  uint32_t crc = 0;  // CRC32C of the bytes above
};
static_assert(sizeof(RelayRequest) == 32, "RelayRequest is 32 bytes on the wire");

// Fills in `crc`.
void SealRelayRequest(RelayRequest* r);
bool RelayRequestValid(const RelayRequest& r);

// The abstract Unix socket name (without the leading NUL) of `rank`'s service.
std::string RelaySocketName(uint64_t comm_id, int rank);
// A non-blocking connection to `rank`'s service (abstract namespace: reachable only from the
// same network namespace).
Result<net::Fd> ConnectRelay(uint64_t comm_id, int rank);

class RelayService final {
 public:
  struct Config {
    uint64_t comm_id = 0;
    int rank = -1;
    std::vector<uint64_t> hosts;                       // host key by rank
    std::vector<uint32_t> rail_ips;                    // this rank's rails
    std::vector<std::vector<net::Endpoint>> peer_eps;  // [rank][rail]: data listeners
    std::function<bool(int rail)> rail_up;             // any thread
    std::function<void(int fd)> prepare_tcp;           // socket options of a relayed TCP leg
    // A request for this rank itself: takes ownership of the Unix socket (any thread).
    std::function<void(net::Fd fd, int src)> deliver_local;
  };
  static Result<std::unique_ptr<RelayService>> Start(Config config);
  ~RelayService();
  RelayService(const RelayService&) = delete;
  RelayService& operator=(const RelayService&) = delete;

  // Stops accepting; lets open sessions run until they end or `grace` passes, then closes
  // them. Idempotent.
  void Stop(std::chrono::milliseconds grace);

  uint64_t bytes_forwarded() const { return bytes_.load(std::memory_order_relaxed); }
  uint64_t sessions_started() const { return sessions_.load(std::memory_order_relaxed); }

 private:
  struct Session;
  explicit RelayService(Config config) : cfg_(std::move(config)) {}
  void Loop();

  Config cfg_;
  net::Fd listener_;
  net::Fd epoll_;
  net::Fd wake_;
  std::thread thread_;
  std::atomic<int64_t> stop_at_ns_{0};  // 0: running; else close everything at this time
  std::atomic<uint64_t> bytes_{0};
  std::atomic<uint64_t> sessions_{0};
};

}  // namespace ftccl::transport::tcp
