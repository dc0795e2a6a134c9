// FakePeer: a real chunk engine (rank 0 of 2) whose peer, rank 1, is the test itself, at the
// other end of socket pairs. The test writes raw frames (sealed with wire::Seal, or not at all)
// and sees what the engine does with them; a background thread answers the engine's probes
// and notices when the engine closes a connection. Used by the hostile-peer tests and the
// frame fuzz target.
//
// The engine is built as the factory builds it (transport/factory.cc), with the TCP backend
// and SocketLinks, only over already connected socket pairs instead of the TCP mesh.
//
// GuardedBuffer: a receive buffer that ends where an inaccessible page begins (trap mode) or
// is framed by canary bytes on both sides (canary mode), so a write outside it is seen.
//
// Thread-safety: one test thread; the probe thread is internal.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "transport/engine/engine.h"
#include "wire.h"

namespace ftccl::testing {

class GuardedBuffer final {
 public:
  // `len` bytes; trap: a PROT_NONE page right behind the last byte and before the first page.
  GuardedBuffer(size_t len, bool trap);
  ~GuardedBuffer();
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return len_; }
  // Whether every byte around the buffer still holds its canary.
  bool Intact() const;

 private:
  uint8_t* map_ = nullptr;
  size_t map_len_ = 0;
  uint8_t* data_ = nullptr;
  size_t len_ = 0;
  bool trap_ = false;
};

// Polls `pred` every millisecond for up to `wait`; whether it became true.
template <typename Pred>
bool Eventually(Pred pred, std::chrono::milliseconds wait) {
  const auto until = std::chrono::steady_clock::now() + wait;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

class FakePeer final {
 public:
  static constexpr uint64_t kCommId = 0x5eedf00dull;

  // How the engine is built beyond the defaults.
  struct Setup {
    // Each connection a TCP connection over 127.0.0.1 instead of a Unix socket pair, so the
    // engine's links have TCP's own acknowledgements (Link::ReadTransportAcks); the fake end
    // listens on port(conn). Run in a private network namespace to filter it.
    bool tcp = false;
    Millis suspect_floor{60};
    Millis suspect_ceiling{500};
    Millis hedge_floor{3};
  };
  // An engine with `conns` connections to rank 1 on each of `rails` rails (connection
  // rail * conns + channel), started. Returns null (with the reason in *why) when it could
  // not be built.
  static std::unique_ptr<FakePeer> Start(int conns, std::string* why, int rails = 1);
  static std::unique_ptr<FakePeer> Start(int conns, std::string* why, int rails,
                                         const Setup& setup);
  // The fake end's TCP port of connection `conn` (Setup::tcp), else 0.
  int port(int conn) const { return ends_[conn]->port; }
  ~FakePeer();
  FakePeer(const FakePeer&) = delete;
  FakePeer& operator=(const FakePeer&) = delete;

  transport::engine::Engine& engine() { return *engine_; }

  // Writes header `h` and `payload` on connection `conn`; `seal` fills both CRCs first (only
  // the header's without a payload: then the header alone is written, whatever its length).
  // Returns false once the engine has closed the connection.
  bool WriteFrame(int conn, wire::FrameHeader h, const void* payload, bool seal = true);
  bool WriteRaw(int conn, const void* data, size_t len);
  // The signature of an allgather of `len` bytes (u8): what a test's plain message claims.
  static transport::Signature BytesSignature(size_t len) {
    transport::Signature sig;
    sig.kind = CollKind::kAllGather;
    sig.dtype = DataType::kU8;
    sig.count = len;
    return sig;
  }
  // A data frame of `key`/`sig` carrying [offset, offset + len) of a message of `msg_len`.
  static wire::FrameHeader DataHeader(const transport::MsgKey& key,
                                      const transport::Signature& sig, uint64_t chunk_seq,
                                      uint64_t offset, uint32_t len, uint64_t msg_len);
  // Sends `data` as one message in chunks of `chunk` bytes, chunk_seq from `*seq` on.
  bool SendMessage(int conn, const transport::MsgKey& key, const transport::Signature& sig,
                   const uint8_t* data, size_t len, size_t chunk, uint64_t* seq);

  // Ends connection `conn` from this side, both directions: the engine reads its end.
  void Hangup(int conn);
  // Whether the engine has closed connection `conn` (waits up to `wait`).
  bool Closed(int conn, std::chrono::milliseconds wait);
  // Waits until the engine has read everything written on `conn` (or it closed), up to `wait`.
  void Drain(int conn, std::chrono::milliseconds wait);
  // The events so far (kept across calls).
  const std::vector<Event>& Events();
  // The path_down event of `conn`, or null (waits up to `wait` for it).
  const Event* PathDown(int conn, std::chrono::milliseconds wait);
  // Frames of `type` the engine wrote so far.
  size_t FramesSeen(wire::FrameType type) const;
  // Acknowledgements the engine wrote on `conn`, and the cumulative value of the last one
  // (on any connection).
  size_t AcksSeen(int conn) const;
  // Data frames the engine wrote on `conn`.
  size_t DataSeen(int conn) const;
  // From now on `conn` answers no probe (a path that silently drops what it gets; the
  // engine's frames are still read).
  void Mute(int conn) { ends_[conn]->muted = true; }
  uint64_t LastAck() const;
  // Stops the engine (orderly close); idempotent.
  void Stop();

 private:
  struct End {
    int fd = -1;
    int port = 0;
    std::mutex write_mu;
    std::atomic<bool> closed{false};
    std::atomic<bool> muted{false};
    size_t data_seen = 0;  // under seen_mu_
    // Reading the engine's frames.
    wire::FrameHeader hdr{};
    size_t got = 0;
    std::vector<uint8_t> payload;
    size_t payload_got = 0;
  };
  FakePeer() = default;
  void Pump();
  void OnFrame(int conn);
  bool WriteAll(int conn, const void* a, size_t alen, const void* b, size_t blen);

  std::unique_ptr<transport::engine::Engine> engine_;
  std::vector<std::unique_ptr<End>> ends_;
  std::thread pump_;
  std::atomic<bool> stop_pump_{false};
  std::vector<Event> events_;
  mutable std::mutex seen_mu_;
  std::vector<size_t> seen_ = std::vector<size_t>(16, 0);
  std::vector<size_t> acks_by_conn_;
  uint64_t last_ack_ = 0;
};

}  // namespace ftccl::testing
