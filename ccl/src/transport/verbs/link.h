// QpLink: an RC queue pair as the byte stream of one connection (transport/link.h), with its
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
// fails and the engine moves its unacknowledged chunks to the other paths. Every other failed
// completion or async event (QP/CQ/device fatal, protection or length errors) is fatal for the
// communicator.
//
// Only verbs/link.cc and verbs/setup.cc include this header (it needs libibverbs).
// Thread-safety: none (the progress thread).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <cstdlib>
#include <deque>
#include <memory>
#include <string>

#include "ftccl/communicator.h"
#include "net.h"
#include "transport/link.h"
#include "transport/verbs/setup.h"

namespace ftccl::transport::verbs {

inline constexpr uint32_t kInfoMagic = 0x51505631;  // "QPV1"
inline constexpr int kSendSlots = 32;
inline constexpr int kRecvSlots = 2 * kSendSlots;
inline constexpr size_t kSlotBytes = 64 * 1024;
inline constexpr uint64_t kFinWrId = UINT64_MAX;
inline constexpr uint32_t kFinImm = 0x46494e21;  // "FIN!"
inline constexpr uint64_t kRecvBase = 1u << 20;  // wr_id of receive slot i: kRecvBase + i

// What one end tells the other during setup.
struct WireInfo {
  uint32_t magic;
  uint32_t qpn;
  uint32_t psn;
  uint32_t mtu;  // enum ibv_mtu
  uint8_t gid[16];
};
static_assert(sizeof(WireInfo) == 32);

// "a.b.c.d" of an address in network byte order.
std::string IpString(uint32_t ip);

// Every verbs object of one link, created in dependency order and destroyed in reverse.
class QpLink final : public Link {
 public:
  QpLink() = default;
  ~QpLink() override;
  QpLink(const QpLink&) = delete;
  QpLink& operator=(const QpLink&) = delete;

  // Opens the device and creates every object up to a QP in INIT with its receives posted.
  Status Init(const RailDevice& dev, const std::string& label);
  WireInfo LocalInfo() const;
  // RTR then RTS towards the peer described by `remote`.
  Status Connect(const WireInfo& remote, const CommOptions& options);

  int fd() const override { return epoll_.get(); }
  uint32_t Ready(uint32_t events) override;
  ssize_t Writev(const iovec* iov, int iovcnt) override;
  ssize_t Read(void* buf, size_t len) override;
  void ShutdownWrite() override;
  std::string error_text() const override { return error_; }
  bool fatal() const override { return fatal_; }
  Status ForceError() override;
  std::string State() const override;
  // The QP stays (State() reports it) until the link is destroyed.
  void Close() override {}
  void Reset() override {}
  bool BackingOff() const override { return false; }  // the QP's retries are the NIC's

 private:
  struct RecvDone {
    int slot;
    uint32_t len;
    uint32_t off;
  };
  // Takes completions off the CQ; with `events`, also the completion channel's and the async
  // events (system calls: only when epoll reported the link).
  void Poll(bool events);
  void OnCompletion(const ibv_wc& wc);
  void SetError(bool fatal, std::string text);
  Status PostRecv(int slot);
  void Rearm();
  uint8_t* SendSlot(int i) { return buf_.get() + static_cast<size_t>(i) * kSlotBytes; }
  uint8_t* RecvSlot(int i) { return buf_.get() + static_cast<size_t>(kSendSlots + i) * kSlotBytes; }

  std::string label_;
  int port_ = 1;
  int gid_index_ = 0;
  int ifindex_ = 0;
  ibv_mtu mtu_ = IBV_MTU_1024;
  ibv_gid gid_{};
  uint32_t psn_ = 0;

  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  ibv_mr* mr_ = nullptr;
  struct FreeDeleter {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, FreeDeleter> buf_;
  net::Fd epoll_;
  net::Fd kick_;
  bool kicked_ = false;

  int send_next_ = 0;      // next send slot to fill
  int send_inflight_ = 0;  // posted sends not yet completed (fin excluded)
  bool want_write_ = false;
  bool fin_sent_ = false;
  std::deque<RecvDone> received_;
  bool eof_ = false;
  bool failed_ = false;
  bool fatal_ = false;
  std::string error_;
};

}  // namespace ftccl::transport::verbs
