#include "transport/verbs/link.h"


#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <net/if.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <random>

#include "log.h"
#include "net.h"

namespace ftccl::transport::verbs {
namespace {




bool PathDownStatus(ibv_wc_status s) {
  return s == IBV_WC_RETRY_EXC_ERR || s == IBV_WC_RNR_RETRY_EXC_ERR || s == IBV_WC_WR_FLUSH_ERR;
}

const char* QpStateName(ibv_qp_state s) {
  switch (s) {
    case IBV_QPS_RESET:
      return "RESET";
    case IBV_QPS_INIT:
      return "INIT";
    case IBV_QPS_RTR:
      return "RTR";
    case IBV_QPS_RTS:
      return "RTS";
    case IBV_QPS_SQD:
      return "SQD";
    case IBV_QPS_SQE:
      return "SQE";
    case IBV_QPS_ERR:
      return "ERR";
    default:
      return "UNKNOWN";
  }
}

// Whether the interface `ifindex` is up and running (true when unknown).
bool NetdevRunning(int ifindex) {
  if (ifindex <= 0) return true;
  char name[IF_NAMESIZE] = {};
  if (if_indextoname(static_cast<unsigned>(ifindex), name) == nullptr) return false;  // gone
  net::Fd s(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return true;
  ifreq r{};
  std::memcpy(r.ifr_name, name, IF_NAMESIZE);
  if (ioctl(s.get(), SIOCGIFFLAGS, &r) != 0) return true;
  return (r.ifr_flags & IFF_UP) && (r.ifr_flags & IFF_RUNNING);
}

Status SetNonBlock(int fd, const char* what) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return ErrnoStatus(what, errno);
  return Status::Ok();
}

}  // namespace

std::string IpString(uint32_t ip) {
  char buf[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &ip, buf, sizeof(buf));
  return buf;
}


QpLink::~QpLink() {
  // Reverse order of creation; each step runs even when an earlier one failed.
  if (qp_ != nullptr && ibv_destroy_qp(qp_) != 0) LOG_WARN("NET/IB", "%s: ibv_destroy_qp failed", label_.c_str());
  if (mr_ != nullptr && ibv_dereg_mr(mr_) != 0) LOG_WARN("NET/IB", "%s: ibv_dereg_mr failed", label_.c_str());
  if (cq_ != nullptr && ibv_destroy_cq(cq_) != 0) LOG_WARN("NET/IB", "%s: ibv_destroy_cq failed", label_.c_str());
  if (channel_ != nullptr && ibv_destroy_comp_channel(channel_) != 0) {
    LOG_WARN("NET/IB", "%s: ibv_destroy_comp_channel failed", label_.c_str());
  }
  if (pd_ != nullptr && ibv_dealloc_pd(pd_) != 0) LOG_WARN("NET/IB", "%s: ibv_dealloc_pd failed", label_.c_str());
  if (ctx_ != nullptr && ibv_close_device(ctx_) != 0) LOG_WARN("NET/IB", "%s: ibv_close_device failed", label_.c_str());
}

Status QpLink::Init(const RailDevice& dev, const std::string& label) {
  label_ = label;
  port_ = dev.port;
  gid_index_ = dev.gid_index;
  ifindex_ = dev.ifindex;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) return ErrnoStatus("ibv_get_device_list", errno);
  for (int i = 0; i < n && ctx_ == nullptr; ++i) {
    if (dev.device == ibv_get_device_name(list[i])) ctx_ = ibv_open_device(list[i]);
  }
  ibv_free_device_list(list);
  if (ctx_ == nullptr) return NetworkError("cannot open RDMA device " + dev.device);
  ibv_port_attr pa{};
  if (ibv_query_port(ctx_, static_cast<uint8_t>(port_), &pa) != 0) {
    return ErrnoStatus("ibv_query_port(" + dev.ToString() + ")", errno);
  }
  mtu_ = pa.active_mtu;
  if (ibv_query_gid(ctx_, static_cast<uint8_t>(port_), gid_index_, &gid_) != 0) {
    return ErrnoStatus("ibv_query_gid(" + dev.ToString() + ")", errno);
  }
  pd_ = ibv_alloc_pd(ctx_);
  if (pd_ == nullptr) return ErrnoStatus("ibv_alloc_pd", errno);
  channel_ = ibv_create_comp_channel(ctx_);
  if (channel_ == nullptr) return ErrnoStatus("ibv_create_comp_channel", errno);
  cq_ = ibv_create_cq(ctx_, kSendSlots + kRecvSlots + 8, nullptr, channel_, 0);
  if (cq_ == nullptr) return ErrnoStatus("ibv_create_cq", errno);
  const size_t bytes = static_cast<size_t>(kSendSlots + kRecvSlots) * kSlotBytes;
  // Page-aligned, so the region maps whole pages.
  buf_.reset(static_cast<uint8_t*>(std::aligned_alloc(4096, bytes)));
  if (!buf_) return Internal("cannot allocate " + std::to_string(bytes) + " bytes of QP buffers");
  mr_ = ibv_reg_mr(pd_, buf_.get(), bytes, IBV_ACCESS_LOCAL_WRITE);
  if (mr_ == nullptr) return ErrnoStatus("ibv_reg_mr", errno);
  ibv_qp_init_attr qa{};
  qa.send_cq = cq_;
  qa.recv_cq = cq_;
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = kSendSlots + 4;
  qa.cap.max_recv_wr = kRecvSlots;
  qa.cap.max_send_sge = 1;
  qa.cap.max_recv_sge = 1;
  qp_ = ibv_create_qp(pd_, &qa);
  if (qp_ == nullptr) return ErrnoStatus("ibv_create_qp", errno);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = static_cast<uint8_t>(port_);
  a.qp_access_flags = 0;
  if (int e = ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
    return ErrnoStatus("ibv_modify_qp(INIT)", e);
  }
  for (int i = 0; i < kRecvSlots; ++i) FTCCL_RETURN_IF_ERROR(PostRecv(i));
  std::random_device rd;
  psn_ = rd() & 0xFFFFFF;

  FTCCL_RETURN_IF_ERROR(SetNonBlock(channel_->fd, "fcntl(completion channel)"));
  FTCCL_RETURN_IF_ERROR(SetNonBlock(ctx_->async_fd, "fcntl(async fd)"));
  if (ibv_req_notify_cq(cq_, 0) != 0) return Internal("ibv_req_notify_cq failed");
  epoll_ = net::Fd(epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_.valid()) return ErrnoStatus("epoll_create1", errno);
  kick_ = net::Fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!kick_.valid()) return ErrnoStatus("eventfd", errno);
  for (int fd : {channel_->fd, ctx_->async_fd, kick_.get()}) {
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.fd = fd;
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &e) != 0) return ErrnoStatus("epoll_ctl", errno);
  }
  return Status::Ok();
}

WireInfo QpLink::LocalInfo() const {
  WireInfo w{};
  w.magic = kInfoMagic;
  w.qpn = qp_->qp_num;
  w.psn = psn_;
  w.mtu = static_cast<uint32_t>(mtu_);
  std::memcpy(w.gid, gid_.raw, 16);
  return w;
}

Status QpLink::Connect(const WireInfo& remote, const CommOptions& options) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = std::min(mtu_, static_cast<ibv_mtu>(remote.mtu));
  a.dest_qp_num = remote.qpn;
  a.rq_psn = remote.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 1;  // 0.01 ms: a receiver out of posted buffers refills them quickly
  a.ah_attr.is_global = 1;
  std::memcpy(a.ah_attr.grh.dgid.raw, remote.gid, 16);
  a.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_index_);
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = static_cast<uint8_t>(port_);
  if (int e = ibv_modify_qp(qp_, &a,
                            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
    return ErrnoStatus("ibv_modify_qp(RTR)", e);
  }
  ibv_qp_attr s{};
  s.qp_state = IBV_QPS_RTS;
  s.timeout = static_cast<uint8_t>(options.verbs_qp_timeout);
  s.retry_cnt = static_cast<uint8_t>(options.verbs_retry_count);
  s.rnr_retry = 7;  // unlimited: RNR is the flow control
  s.sq_psn = psn_;
  s.max_rd_atomic = 1;
  if (int e = ibv_modify_qp(qp_, &s,
                            IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)) {
    return ErrnoStatus("ibv_modify_qp(RTS)", e);
  }
  return Status::Ok();
}

Status QpLink::PostRecv(int slot) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(RecvSlot(slot));
  sge.length = kSlotBytes;
  sge.lkey = mr_->lkey;
  ibv_recv_wr wr{};
  wr.wr_id = kRecvBase + static_cast<uint64_t>(slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (int e = ibv_post_recv(qp_, &wr, &bad)) return ErrnoStatus("ibv_post_recv", e);
  return Status::Ok();
}

void QpLink::SetError(bool fatal, std::string text) {
  if (failed_) return;
  failed_ = true;
  fatal_ = fatal;
  error_ = label_ + ": " + text;
  if (fatal) {
    LOG_ERROR("NET/IB", "%s (fatal for the communicator)", error_.c_str());
  } else {
    LOG_WARN("NET/IB", "%s: path down", error_.c_str());
  }
}

void QpLink::OnCompletion(const ibv_wc& wc) {
  if (wc.status != IBV_WC_SUCCESS) {
    std::string what = std::string(wc.wr_id >= kRecvBase && wc.wr_id != kFinWrId ? "receive" : "send") +
                       " completion " + ibv_wc_status_str(wc.status) + " (vendor error " +
                       std::to_string(wc.vendor_err) + ")";
    bool path_down = PathDownStatus(wc.status);
    if (!path_down) {
      // A send that fails locally because the port went down (rxe reports
      // IBV_WC_LOC_QP_OP_ERR when it cannot transmit) is the path, not the communicator.
      // The netdev goes down before rxe hears of it, so ask the netdev too.
      ibv_port_attr pa{};
      if (ibv_query_port(ctx_, static_cast<uint8_t>(port_), &pa) == 0 && pa.state != IBV_PORT_ACTIVE) {
        path_down = true;
        what += std::string(" with the port ") + ibv_port_state_str(pa.state);
      } else if (!NetdevRunning(ifindex_)) {
        path_down = true;
        what += " with its netdev down";
      }
    }
    SetError(!path_down, what);
    return;
  }
  if (wc.wr_id == kFinWrId) return;
  if (wc.opcode == IBV_WC_SEND) {
    --send_inflight_;
    return;
  }
  if (wc.opcode == IBV_WC_RECV) {
    const int slot = static_cast<int>(wc.wr_id - kRecvBase);
    if ((wc.wc_flags & IBV_WC_WITH_IMM) && ntohl(wc.imm_data) == kFinImm && wc.byte_len == 0) {
      received_.push_back({slot, 0, UINT32_MAX});  // end of stream marker
    } else {
      received_.push_back({slot, wc.byte_len, 0});
    }
  }
}

void QpLink::Poll(bool events) {
  // Completion channel: acknowledge the events, re-arm, then drain the CQ (completions that
  // arrive after the re-arm raise a new event).
  unsigned n_events = 0;
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  while (events && ibv_get_cq_event(channel_, &ev_cq, &ev_ctx) == 0) ++n_events;
  if (n_events > 0) {
    ibv_ack_cq_events(cq_, n_events);
    if (ibv_req_notify_cq(cq_, 0) != 0) SetError(true, "ibv_req_notify_cq failed");
  }
  ibv_wc wc[32];
  for (;;) {
    int n = ibv_poll_cq(cq_, 32, wc);
    if (n < 0) {
      SetError(true, "ibv_poll_cq failed");
      break;
    }
    for (int i = 0; i < n; ++i) OnCompletion(wc[i]);
    if (n < 32) break;
  }
  ibv_async_event ae;
  while (events && ibv_get_async_event(ctx_, &ae) == 0) {
    const ibv_event_type t = ae.event_type;
    ibv_ack_async_event(&ae);
    switch (t) {
      case IBV_EVENT_PORT_ERR:
        SetError(false, std::string("async event ") + ibv_event_type_str(t) + " (port down)");
        break;
      case IBV_EVENT_PORT_ACTIVE:
      case IBV_EVENT_GID_CHANGE:
      case IBV_EVENT_LID_CHANGE:
      case IBV_EVENT_PKEY_CHANGE:
      case IBV_EVENT_SM_CHANGE:
      case IBV_EVENT_CLIENT_REREGISTER:
      case IBV_EVENT_COMM_EST:
      case IBV_EVENT_SQ_DRAINED:
      case IBV_EVENT_QP_LAST_WQE_REACHED:
        break;
      default:
        SetError(true, std::string("async event ") + ibv_event_type_str(t));
        break;
    }
  }
}

void QpLink::Rearm() {
  // epoll only sees new kernel events; data already taken off the CQ but not yet read, or a
  // writer waiting for slots that are free already, must wake the progress thread again.
  const bool pending = !received_.empty() || failed_ || (want_write_ && send_inflight_ < kSendSlots);
  if (pending && !kicked_) {
    uint64_t one = 1;
    if (write(kick_.get(), &one, sizeof(one)) == sizeof(one)) kicked_ = true;
  }
}

uint32_t QpLink::Ready(uint32_t) {
  if (kicked_) {
    uint64_t v;
    (void)!read(kick_.get(), &v, sizeof(v));
    kicked_ = false;
  }
  Poll(true);
  uint32_t out = 0;
  if (failed_) out |= EPOLLIN | EPOLLERR;
  if (!received_.empty()) out |= EPOLLIN;
  if (want_write_ && send_inflight_ < kSendSlots) {
    want_write_ = false;
    out |= EPOLLOUT;
  }
  return out;
}

ssize_t QpLink::Writev(const iovec* iov, int iovcnt) {
  Poll(false);
  if (failed_) {
    errno = ECONNRESET;
    return -1;
  }
  if (fin_sent_) {
    errno = EPIPE;
    return -1;
  }
  size_t total = 0;
  int vi = 0;
  size_t voff = 0;
  while (vi < iovcnt && send_inflight_ < kSendSlots) {
    uint8_t* slot = SendSlot(send_next_);
    size_t used = 0;
    while (vi < iovcnt && used < kSlotBytes) {
      size_t take = std::min(kSlotBytes - used, iov[vi].iov_len - voff);
      std::memcpy(slot + used, static_cast<const uint8_t*>(iov[vi].iov_base) + voff, take);
      used += take;
      voff += take;
      if (voff == iov[vi].iov_len) {
        ++vi;
        voff = 0;
      }
    }
    if (used == 0) break;
    ibv_sge sge{};
    sge.addr = reinterpret_cast<uintptr_t>(slot);
    sge.length = static_cast<uint32_t>(used);
    sge.lkey = mr_->lkey;
    ibv_send_wr wr{};
    wr.wr_id = static_cast<uint64_t>(send_next_);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    if (int e = ibv_post_send(qp_, &wr, &bad)) {
      SetError(false, std::string("ibv_post_send: ") + strerror(e));
      if (total > 0) return static_cast<ssize_t>(total);
      errno = ECONNRESET;
      return -1;
    }
    ++send_inflight_;
    send_next_ = (send_next_ + 1) % kSendSlots;
    total += used;
  }
  if (total == 0) {
    bool empty = true;
    for (int i = 0; i < iovcnt; ++i) empty &= iov[i].iov_len == 0;
    if (empty) return 0;
    want_write_ = true;
    Rearm();
    errno = EAGAIN;
    return -1;
  }
  return static_cast<ssize_t>(total);
}

ssize_t QpLink::Read(void* buf, size_t len) {
  Poll(false);
  auto* out = static_cast<uint8_t*>(buf);
  size_t got = 0;
  while (got < len && !received_.empty()) {
    RecvDone& r = received_.front();
    if (r.off == UINT32_MAX) {
      eof_ = true;
      break;
    }
    size_t take = std::min<size_t>(len - got, r.len - r.off);
    std::memcpy(out + got, RecvSlot(r.slot) + r.off, take);
    got += take;
    r.off += static_cast<uint32_t>(take);
    if (r.off == r.len) {
      const int slot = r.slot;
      received_.pop_front();
      if (!failed_) {
        Status st = PostRecv(slot);
        if (!st.ok()) SetError(false, st.ToString());
      }
    }
  }
  if (got > 0) {
    Rearm();
    return static_cast<ssize_t>(got);
  }
  if (eof_) return 0;
  if (failed_) {
    errno = ECONNRESET;
    return -1;
  }
  errno = EAGAIN;
  return -1;
}

void QpLink::ShutdownWrite() {
  if (fin_sent_ || failed_ || qp_ == nullptr) return;
  fin_sent_ = true;
  ibv_send_wr wr{};
  wr.wr_id = kFinWrId;
  wr.num_sge = 0;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.imm_data = htonl(kFinImm);
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (int e = ibv_post_send(qp_, &wr, &bad)) SetError(false, std::string("ibv_post_send(end of stream): ") + strerror(e));
}

Status QpLink::ForceError() {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  if (int e = ibv_modify_qp(qp_, &a, IBV_QP_STATE)) return ErrnoStatus("ibv_modify_qp(ERR)", e);
  LOG_WARN("NET/IB", "%s: QP %u moved to IBV_QPS_ERR by fault injection", label_.c_str(), qp_->qp_num);
  // The flushed work requests complete with IBV_WC_WR_FLUSH_ERR; with nothing posted to the
  // send queue the receive flushes still report it. Wake the progress thread to see them.
  uint64_t one = 1;
  if (!kicked_ && write(kick_.get(), &one, sizeof(one)) == sizeof(one)) kicked_ = true;
  return Status::Ok();
}

std::string QpLink::State() const {
  ibv_qp_attr a{};
  ibv_qp_init_attr ia{};
  if (ibv_query_qp(qp_, &a, IBV_QP_STATE, &ia) != 0) return std::string("query failed: ") + strerror(errno);
  return QpStateName(a.qp_state);
}


}  // namespace ftccl::transport::verbs
