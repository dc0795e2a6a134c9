// TCP implementation of the transport: `channels_per_rail` connections per peer per rail,
// driven by one progress thread with epoll. Large messages are cut into chunks; each connection
// pulls the next chunk of a peer when it can write, so faster paths carry more. See wire.h for
// the frame format and transport/transport.h for the contract.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <unordered_set>
#include <vector>

#include "bootstrap.h"
#include "net.h"
#include "transport/fault_target.h"
#include "transport/link.h"
#include "transport/tcp/relay.h"
#include "transport/transport.h"
#include "wire.h"

namespace ftccl::transport::tcp {

class TcpTransport final : public Transport, public FaultTarget {
 public:
  // Opens one listener per rail on the given local addresses (ephemeral ports).
  static Result<std::vector<std::pair<net::Fd, net::Endpoint>>> OpenListeners(
      const std::vector<uint32_t>& rail_ips);

  // Establishes every connection of the mesh (rank j > i connects to i on every rail and
  // channel, from j's own rail address) before `deadline`. Does not start the progress thread.
  static Result<std::unique_ptr<TcpTransport>> Connect(
      const CommOptions& options, const BootstrapTable& table,
      std::vector<std::pair<net::Fd, net::Endpoint>> listeners,
      const std::vector<uint32_t>& rail_ips, Clock::time_point deadline);

  ~TcpTransport() override;
  TcpTransport(const TcpTransport&) = delete;
  TcpTransport& operator=(const TcpTransport&) = delete;

  // Starts the progress thread. REQUIRES: called once, after Connect.
  Status Start();

  void Begin(uint64_t coll_seq, const Signature& sig) override;
  OpPtr Send(int peer, const MsgKey& key, const Signature& sig, const void* buf,
             size_t len) override;
  OpPtr Recv(int peer, const MsgKey& key, const Signature& sig, void* buf, size_t len) override;
  Status Wait(const OpPtr& op, Clock::time_point deadline) override;
  void Fail(const Status& why, uint64_t coll_seq) override;
  Status error() const override;
  CommStats Stats() const override;
  std::vector<Event> DrainEvents() override;
  void Shutdown() override;

  // FaultTarget (the fault hook): conn_corrupt damages the next data frame to `peer` on one
  // connection of `rail` (payload: its checksum; header: the header's checksum).
  const char* TransportName() const override {
    return options_.transport == "verbs" ? "verbs" : "tcp";
  }
  // qp_error through the fault hook (verbs): InjectQpError below, answered with the QP state.
  Result<PathFaultState> InjectQpError(int peer, int rail, Deadline deadline) override;
  Result<PathFaultState> QueryPath(int peer, int rail, Deadline deadline) override;
  Result<PathFaultState> CorruptNextFrame(int peer, int rail, FramePart part,
                                          Deadline deadline) override;
  // Fault hook (verbs transport): moves the QPs of every channel to `peer` on `rail` into
  // IBV_QPS_ERR on the progress thread, as a broken path would. The transport then recovers
  // like for any failed path: the unacknowledged chunks move to the other connections. Fails
  // with kInvalidArgument for a bad peer/rail, a TCP communicator or no live QP there.
  Status InjectQpError(int peer, int rail);
  // "channel C: STATE" per channel to `peer` on `rail` (STATE as ibv_query_qp reports it, or
  // "closed" once the transport dropped the connection).
  Result<std::vector<std::string>> QpStates(int peer, int rail);
  // The state of the first QP to `peer` on `rail` ("RTS", "ERR", ...; "closed"), for the hook.
  std::optional<std::string> FirstQpState(int peer, int rail);

 private:
  struct TxItem {
    wire::FrameHeader hdr;
    const uint8_t* payload = nullptr;
    std::unique_ptr<uint8_t[]> owned;  // payload copies that must outlive the user's buffer
    uint32_t len = 0;
    bool is_data = false;
    uint64_t seq = 0;
    size_t sent = 0;  // bytes of header + payload written so far
  };
  struct RxMsg {
    MsgKey key;
    Signature sig;
    uint64_t len = 0;
    OpPtr recv;                          // the posted receive, if any yet
    std::unique_ptr<uint8_t[]> staging;  // data that arrived before the receive was posted
    std::vector<std::pair<uint64_t, uint32_t>> staged;  // (offset, len) complete in staging
    uint64_t bytes_done = 0;
    bool any_chunk = false;
  };
  struct Conn {
    net::Fd fd;                  // the socket, or (verbs) a duplicate of link->fd() for epoll
    std::unique_ptr<Link> link;  // verbs: the QP the connection reads and writes instead
    int peer = -1;
    int rail = 0;
    int channel = 0;
    bool alive = true;
    bool blocked = false;  // waiting for EPOLLOUT
    bool half_closed = false;
    // No acknowledgement came back for a chunk sent here within the retransmit timeout: the
    // path is presumed broken, carries no new data, and is probed until it answers.
    bool suspect = false;
    Clock::time_point last_ping;
    uint64_t ping_nonce = 0;
    bool failback_pending = false;  // back up: the next data chunk on it is a failback
    // Flap damping: when it went down recently (within flap_window) and until when an answered
    // probe does not yet return it to use.
    std::deque<Clock::time_point> downs;
    Clock::time_point hold_until{};
    bool up_since_down = false;  // suspect, but its link came up or it answered a probe since
    // Progress: the last time something sent here was acknowledged or a probe answered; the
    // oldest probe still unanswered; the measured round-trip time (ms).
    Clock::time_point last_progress{};
    Clock::time_point ping_outstanding_since{};  // epoch: none outstanding
    // Re-establishment after a failure (the higher rank of the pair connects again).
    bool reconnect = false;
    net::Fd connecting;  // a connect in progress
    Clock::time_point connect_deadline{};
    Clock::time_point next_connect{};
    Clock::time_point last_dial{};  // the last time it was connected afresh (Redial)
    // The connecting end's port: names this connection (not the slot) in kPathDown notices.
    uint16_t conn_port = 0;
    double srtt_ms = 0;
    double rttvar_ms = 0;
    // The longest wait between two signs of progress while it had work, decaying: a path
    // that is slow to show progress in normal operation (an overloaded host) is given longer.
    double max_gap_ms = 0;
    bool have_rtt = false;
    // Throughput: payload acknowledged per second over sampling periods in which the path had
    // more to carry than it took (it blocked or hit its window); 0 until measured.
    uint64_t outstanding = 0;  // payload bytes sent here, not yet known to be delivered
    uint64_t credited = 0;     // payload bytes delivered, cumulative
    uint64_t sample_bytes = 0;
    Clock::time_point sample_start{};
    Clock::time_point busy_since{};  // outstanding > 0 since (epoch: idle)
    Clock::duration busy{};          // busy time within the current sample
    bool saturated = false;
    double rate = 0;  // bytes per second, over the time it had data outstanding
    std::deque<TxItem> ctrl;
    std::optional<TxItem> cur;
    // Receive state machine.
    wire::FrameHeader hdr;
    size_t hdr_got = 0;
    bool in_payload = false;
    uint8_t* dst = nullptr;  // nullptr: discard
    size_t payload_got = 0;
    std::shared_ptr<RxMsg> msg;
    bool into_staging = false;
    std::string text;  // abort reason
    // Intra-host relay: the path to `peer` through a rank of this host (rail == num_rails_).
    // It carries data only while no direct path to the peer works. `relay_initiator`: this
    // rank opened it (it lost its own rails) and closes it again; `relay_on`: it carried the
    // relay_on event.
    bool relay = false;
    bool relay_initiator = false;
    bool relay_on = false;
    int relay_via = -1;
    size_t relay_pick = 0;                  // which neighbour to try next
    std::string relay_reason;               // why it was opened, for its events
    Clock::time_point relay_drain_since{};  // a direct path works again since
    // Fault hook: damage the next data frame written here; frames damaged so far, and when.
    std::optional<FramePart> corrupt_next;
    uint64_t corrupt_sent = 0;
    int64_t corrupt_last_ns = 0;
  };
  struct TxChunk {
    OpPtr op;
    uint64_t offset = 0;
    uint32_t len = 0;
    wire::FrameHeader hdr;
    Clock::time_point sent_at;
    int conn = -1;
    int tx_count = 0;
    bool in_ready = false;
    bool delivered = false;  // acknowledged as received: reached the peer, not resent
    int counted = -1;        // the connection whose `outstanding` includes this chunk
  };
  // An accepted connection whose hello has not arrived yet (a higher rank reconnecting).
  struct Pending {
    net::Fd fd;
    int rail = 0;  // the listener's rail; -1: a Unix socket from a same-host rank (relay)
    wire::FrameHeader hello;
    size_t got = 0;
    Clock::time_point deadline;
  };
  struct Peer {
    std::vector<int> conns;
    uint64_t next_seq = 0;
    std::map<uint64_t, TxChunk> unacked;
    std::deque<uint64_t> ready;
    uint64_t cum = 0;
    uint64_t delivered = 0;  // sender: every chunk below this reached the peer
    std::set<uint64_t> above;
    std::unordered_set<uint64_t> inflight;
    std::map<MsgKey, std::shared_ptr<RxMsg>> rx;
    std::map<uint64_t, uint64_t> held;  // chunk_seq -> coll_seq of collectives not begun here
    bool ack_dirty = false;
    int ack_conn = -1;       // the connection that last delivered data: acknowledgements go there
    int last_ack_conn = -1;  // where the last acknowledgement went: an abort follows it there
    size_t ack_rr = 0;
    bool closing = false;               // BYE received
    bool resume_pending = false;        // a path went down: the next acknowledgement resumes
    Clock::time_point no_path_since{};  // every live path suspect since (epoch: not so)
    std::map<int, double> shares;       // connection -> share of the striping last announced
    bool gone = false;                  // no connection left
  };

  TcpTransport(const CommOptions& options, const BootstrapTable& table);
  // Replaces every connection's socket by an RC QP link (qp_faults.cc). REQUIRES: Connect.
  Status UpgradeToVerbs(Clock::time_point deadline);
  // Runs `fn` on the progress thread and waits for its Status (bounded).
  Status RunOnProgress(std::function<Status()> fn);

  // Progress thread.
  void Loop();
  void RunCommands();
  void PostSend(const OpPtr& op);
  void PostRecv(const OpPtr& op);
  void Kick(int peer);
  // Writes what `ci` has queued until it blocks, pulling at most `max_new_chunks` new data
  // chunks. Returns the number pulled.
  size_t Flush(int ci, size_t max_new_chunks = SIZE_MAX);
  bool PullData(int ci);
  void OnReadable(int ci);
  void OnHeader(int ci);
  void OnPayloadDone(int ci);
  void HandleAck(int peer, uint64_t cum, uint64_t delivered, int from_ci);
  // `ch` reached the peer: credits its connection with progress and a round-trip sample.
  void Credit(TxChunk& ch, Clock::time_point now);
  void RttSample(Conn& c, double ms);
  // The suspicion timeout of a connection: srtt + 4 rttvar within [floor, ceiling].
  Clock::duration SuspectTimeout(const Conn& c) const;
  // How long a reconnect attempt on this connection waits for its handshake.
  Clock::duration ConnectTimeout(const Conn& c) const;
  // Counts a down transition for flap damping and sets the hold-down.
  void RecordDown(Conn& c, Clock::time_point now);
  // Moves `ch`'s bytes onto connection `ci`'s outstanding count (-1: onto none).
  void Count(TxChunk& ch, int ci);
  // How much a connection may have outstanding: path_queue at its measured rate.
  uint64_t Window(const Conn& c) const;
  // Updates throughput estimates; announces a changed striping of `peer` as kRebalanced.
  void SampleRates(int peer, Clock::time_point now);
  // Takes a path out of use: its unacknowledged chunks move to the others, it is probed.
  void MarkDown(int ci, Clock::time_point now, const std::string& reason);
  void Emit(EventKind kind, int peer, int rail, int channel, std::string reason);
  Status OpenLinkWatch();
  void OnLinkMessages();
  // Reads every rail's link state with SIOCGIFFLAGS, after notifications were lost.
  void ResyncLinks();
  // A rail's link went up or down: its paths go down at once, or are probed (or redialled).
  void SetRailLink(int rail, bool up);
  // The rail's link is down, or up but not yet settled (link_settle): nothing is sent from it.
  bool RailQuiet(int rail) const;
  // What a rail's link change means for its connections, once an up link has settled.
  void RailLinkChanged(int rail, bool up, bool long_down, Clock::time_point now);
  void SendPing(int ci, Clock::time_point now);
  void HandleNack(int peer, uint64_t seq);
  void DetachInflight(int peer, uint64_t seq);
  // A connection broke. `peer_closed`: the peer closed it in order (its process is ending), so
  // it is not re-established.
  void ConnFailed(int ci, const std::string& reason, bool peer_closed = false);
  // Reconnection: the higher rank starts connects, the lower one accepts them.
  void StartReconnect(int ci, Clock::time_point now);
  void OnConnectDone(int ci);
  void OnAccept(int rail);
  void OnPendingReadable(uint64_t id);
  // Puts a freshly established socket into slot `ci`: suspect until it answers a probe.
  void Install(int ci, net::Fd fd);
  void PeerGone(int peer, const std::string& reason);
  // A suspect connection that stays silent is replaced by a fresh one rather than waiting for
  // its socket's retransmission backoff (seconds after a long outage): the higher rank closes
  // it (DropQuietly: no events, it is already down) and connects again; the lower rank asks
  // it to (kRedial) when its rail comes back.
  void Redial(int ci, const std::string& why);
  // Returns how many unacknowledged chunks moved to the other paths.
  size_t DropQuietly(int ci);
  // Intra-host relay (relay.h). CheckRelay opens the relay path to `peer` when every rail of
  // this rank is down and closes it once a direct path works again.
  void CheckRelay(int peer, Clock::time_point now);
  void StartRelay(int ci, Clock::time_point now);
  void CloseRelay(int ci, const std::string& why);
  // A relayed connection that ends: its chunks move back to the direct paths.
  void RelayFailed(int ci, const std::string& reason);
  // A Unix socket from a same-host rank, handed over by the relay service.
  void AdoptLocal(net::Fd fd);
  bool OwnRailsLost() const;
  std::string Label(const Conn& c) const;
  void SendAcks();
  void CheckTimers();
  void Requeue(Peer& p, std::vector<uint64_t> seqs);
  uint64_t AckValue(const Peer& p) const;
  void OnBegin(uint64_t coll_seq, const Signature& sig);
  Status MismatchStatus(uint64_t coll_seq, int peer, const Signature& mine,
                        const Signature& theirs) const;
  void EnqueueCtrl(int peer, TxItem item);
  void Complete(const OpPtr& op, Status st);
  void FailLocked(const Status& why, uint64_t coll_seq);
  void WatchWrite(int ci, bool on);
  void Post(std::function<void()> fn);
  int PickConn(int peer);
  // Fault hook (any thread): has the progress thread read one path's state and, with `arm`,
  // arm conn_corrupt on one of its live connections; waits for the answer until `deadline`.
  Result<PathFaultState> HookPath(int peer, int rail, std::optional<FramePart> arm,
                                  Deadline deadline);
  void DamageForHook(Conn& c, TxItem* item);

  const CommOptions options_;
  const int rank_;
  const int size_;
  const int num_rails_;
  const uint64_t comm_id_;

  std::vector<Conn> conns_;
  std::vector<Peer> peers_;
  net::Fd epoll_;
  net::Fd wake_;
  std::thread thread_;
  bool started_ = false;
  bool stopping_ = false;  // progress thread: shutdown requested
  bool begun_ = false;     // progress thread: a collective has begun
  uint64_t cur_seq_ = 0;   // progress thread: the collective begun last
  Signature cur_sig_;
  std::unique_ptr<uint8_t[]> discard_;
  std::mt19937_64 rng_;
  Clock::time_point last_check_{};  // progress thread: the previous CheckTimers
  // How late this thread's own ticks have been lately (ms, decaying): on an overloaded host
  // the peers are as late to answer, and silence means less.
  double tick_lag_ms_ = 0;
  // Notes a sign of progress on `c` at `now`.
  void Progress(Conn& c, Clock::time_point now);

  std::mutex cmd_mu_;
  std::vector<std::function<void()>> cmds_;

  mutable std::mutex mu_;  // guards error_ and op completion
  std::condition_variable cv_;
  Status error_;
  std::atomic<bool> failed_{false};
  // The failure concerns collectives from this one on; earlier ones still in flight finish
  // normally (a peer that is ahead may abort the next collective while this rank completes
  // the current one). Guarded by mu_ for writers; read by the progress thread.
  std::atomic<uint64_t> fail_from_{UINT64_MAX};
  bool Dead(uint64_t coll_seq) const { return failed_ && coll_seq >= fail_from_; }
  bool fail_done_ = false;   // guarded by mu_: FailLocked ran
  bool abort_sent_ = false;  // progress thread

  // Statistics (written by the progress thread).
  std::atomic<uint64_t> st_frames_sent_{0}, st_frames_recv_{0}, st_retx_{0}, st_crc_{0},
      st_dups_{0}, st_ooo_{0}, st_acks_{0}, st_nacks_{0}, st_staged_{0};
  std::unique_ptr<std::atomic<uint64_t>[]> st_rail_bytes_;

  std::mutex events_mu_;
  std::vector<Event> events_;

  // Link state of the rails' interfaces (netlink RTNLGRP_LINK), when watched.
  net::Fd link_watch_;
  std::vector<uint32_t> rail_ips_;                    // by rail, network byte order
  std::vector<std::vector<net::Endpoint>> peer_eps_;  // [peer][rail]: its data listener
  std::vector<net::Fd> listeners_;                    // by rail, kept open for reconnections
  std::map<uint64_t, Pending> pending_;
  uint64_t next_pending_ = 0;
  std::vector<int> rail_ifindex_;  // by rail; 0 when unknown
  std::vector<bool> rail_up_;
  std::vector<Clock::time_point> rail_down_at_;  // by rail: when its link went down last
  // By rail: when a link that came up has settled (its paths are then probed), and whether it
  // had been down long enough for its connections to be dialled afresh.
  std::vector<Clock::time_point> rail_settle_at_;
  std::vector<bool> rail_settle_long_;
  std::atomic<uint64_t> rails_up_mask_{~0ull};   // rail_up_ for other threads (rails < 64)
  // Intra-host relay.
  std::vector<uint64_t> hosts_;  // host key by rank
  std::vector<int> relay_slot_;  // by peer: its relay connection, -1 without
  std::vector<int> neighbours_;  // the other ranks of this host
  std::unique_ptr<RelayService> relay_service_;
};

}  // namespace ftccl::transport::tcp
