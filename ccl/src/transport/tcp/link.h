// SocketLink: a connected, non-blocking TCP (or, for a relay on this host, Unix) stream socket
// as the byte stream of one connection (transport/link.h).
//
// Thread-safety: none (the progress thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "net.h"
#include "transport/link.h"

namespace ftccl::transport::tcp {

class SocketLink final : public Link {
 public:
  // Takes the socket. REQUIRES: connected and non-blocking.
  explicit SocketLink(net::Fd fd) : fd_(std::move(fd)) {}
  SocketLink(const SocketLink&) = delete;
  SocketLink& operator=(const SocketLink&) = delete;

  int fd() const override { return fd_.get(); }
  uint32_t Ready(uint32_t events) override { return events; }
  ssize_t Writev(const iovec* iov, int iovcnt) override;
  ssize_t Read(void* buf, size_t len) override;
  void ShutdownWrite() override;
  void Close() override { fd_.Reset(); }
  void Reset() override;
  bool BackingOff() const override;  // TCP_INFO: tcpi_backoff > 0
  // TCP_INFO: unacknowledged data, and tcpi_bytes_acked has not grown for 8 round trips and
  // at least 20 ms (as far as the readings show: it is read at each call of this and of
  // AcknowledgedWithin).
  bool AwaitingRetransmission() override;
  // TCP_INFO: nothing unacknowledged, or tcpi_bytes_acked grew within `window`.
  bool AcknowledgedWithin(std::chrono::milliseconds window) override;
  // TCP_INFO: tcpi_unacked, tcpi_rtt and tcpi_rttvar, and the last reading at which
  // tcpi_bytes_acked or tcpi_delivered (SACKed segments too) grew or nothing was
  // unacknowledged.
  std::optional<TransportAcks> ReadTransportAcks() override;
  std::string error_text() const override { return error_; }
  bool fatal() const override { return false; }
  Status ForceError() override;
  std::string State() const override { return fd_.valid() ? "open" : "closed"; }

 private:
  net::Fd fd_;
  std::string error_;  // the last failed call and its errno
  using Clock = std::chrono::steady_clock;
  struct Acks {
    uint32_t unacked;  // segments
    uint32_t rtt_us;
    uint32_t rttvar_us;
    Clock::time_point previous;  // the reading before this one (none: the first)
    bool grew;                   // tcpi_bytes_acked changed since that reading
    uint64_t delivery_rate;      // tcpi_delivery_rate, bytes per second
  };
  // Reads TCP_INFO and updates the record below; nothing for a socket without TCP_INFO.
  std::optional<Acks> ReadAcks(Clock::time_point now);
  // The record of tcpi_bytes_acked that every reading keeps, for AcknowledgedWithin and
  // AwaitingRetransmission: its value at the last reading, the first reading that saw that
  // value (it has not grown since), the last reading that saw it grow or nothing outstanding
  // (none before), and when it was last read.
  uint64_t bytes_acked_ = 0;
  Clock::time_point unchanged_since_{};
  Clock::time_point acked_at_{};
  Clock::duration acked_gap_{};  // between the reading at acked_at_ and the one before it
  Clock::time_point sampled_at_{};
  // The last reading that saw tcpi_bytes_acked or tcpi_delivered grow or nothing
  // unacknowledged (ReadTransportAcks), and tcpi_delivered then.
  Clock::time_point quiet_since_{};
  uint32_t delivered_ = 0;
};

}  // namespace ftccl::transport::tcp
