// The chunk engine: ftccl's reliable, multi-path message protocol over any backend's byte
// streams (transport/link.h). It implements the Transport contract (transport/transport.h) and
// the fault hook's FaultTarget.
//
// Every pair of ranks has `channels_per_rail` connections on every rail (plus, for the intra-
// host relay, one more path through a rank of the same host). Messages are cut into chunks;
// each chunk is a frame with a sequence number and CRC32C (wire.h). The receiver acknowledges
// cumulatively with selective ranges (SACK), drops duplicates and answers a bad payload with a
// NACK; a send completes only when every chunk is acknowledged, so any chunk can be resent on
// any path until then: that is what makes failover lossless.
//
// The engine is split by concern, one file each:
//   engine.cc       lifecycle, the progress loop, completion and failure (this class's core)
//   tx.cc           posting sends, striping chunks over paths, writing frames, acknowledging
//   rx.cc           reading frames: one handler per frame type; posting receives
//   paths.cc        path health over time: timers, suspicion, probes, failures, link state
//   reconnect.cc    connections set up again through the backend (redial, accept)
//   relay.cc        the intra-host relay path
//   fault_hook.cc   the FaultTarget operations (conn_corrupt, qp_error, path state)
//   path_health.h   a path's RTT, suspicion and damping (pure, unit-tested)
//   striping.h      a path's measured rate, window and the striping shares (pure, unit-tested)
//   frame_check.h   what a received frame may claim; a lie fails its connection (pure, tested)
//   link_watch.h    the rails' link state from netlink
// The backend (transport/backend.h: tcp/ or verbs/) owns connection setup; the engine knows a
// connection only as a Link.
//
// Thread-safety: as Transport. One progress thread owns every connection; other threads talk
// to it through Post() and the completion state guarded by mu_.
#pragma once

#include <atomic>
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
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "bootstrap.h"
#include "net.h"
#include "transport/backend.h"
#include "transport/engine/frame_check.h"
#include "transport/engine/link_watch.h"
#include "transport/engine/path_health.h"
#include "transport/engine/staging_pool.h"
#include "transport/engine/striping.h"
#include "transport/fault_target.h"
#include "transport/link.h"
#include "transport/transport.h"
#include "wire.h"

namespace ftccl::transport::engine {

// A connection of the initial mesh, handed to the engine by the factory.
struct InitialConn {
  std::unique_ptr<Link> link;  // null: not connected at init; starts down, set up when it works
  int peer = -1;
  int rail = 0;
  int channel = 0;
  uint16_t conn_port = 0;  // names the connection in path-down notices (0: any)
};

class Engine final : public Transport, public FaultTarget {
 public:
  // REQUIRES: `conns` hold every path of the mesh (those not connected at init with a null
  // link, only with a backend that redials); `rail_ips` are this rank's rail addresses
  // (network byte order), by rail.
  Engine(const CommOptions& options, const BootstrapTable& table, std::unique_ptr<Backend> backend,
         std::vector<InitialConn> conns, std::vector<uint32_t> rail_ips);
  ~Engine() override;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Starts the progress thread. REQUIRES: called once.
  Status Start();

  void Begin(uint64_t coll_seq, const Signature& sig) override;
  OpPtr Send(int peer, const MsgKey& key, const Signature& sig, const void* buf,
             size_t len) override;
  OpPtr Recv(int peer, const MsgKey& key, const Signature& sig, void* buf, size_t len) override;
  OpPtr Forward(int peer, const MsgKey& key, const Signature& sig, const OpPtr& received) override;
  Status Wait(const OpPtr& op, Clock::time_point deadline) override;
  void Fail(const Status& why, uint64_t coll_seq) override;
  Status error() const override;
  Status ErrorFor(uint64_t coll_seq) const override;
  CommStats Stats() const override;
  std::vector<Event> DrainEvents() override;
  void Shutdown() override;
  // The rank whose loss failed the communicator (see FailLocked), or -1.
  int LostPeer() const;
  // Runs `fn` on the progress thread, between the loop's reads and its acknowledgements, and
  // waits for its Status (bounded: 5 s). The fault hook's requests run so; a test also holds
  // the progress thread with it, to order what the engine reads and writes.
  Status RunOnProgress(std::function<Status()> fn);

  // FaultTarget (the fault hook): conn_corrupt damages the next data frame to `peer` on one
  // connection of `rail` (payload: its checksum; header: the header's checksum).
  const char* TransportName() const override { return backend_->name(); }
  Result<PathFaultState> InjectQpError(int peer, int rail, Deadline deadline) override;
  Result<PathFaultState> QueryPath(int peer, int rail, Deadline deadline) override;
  Result<PathFaultState> CorruptNextFrame(int peer, int rail, FramePart part,
                                          Deadline deadline) override;
  // qp_error (verbs): moves the QPs of every channel to `peer` on `rail` into IBV_QPS_ERR on
  // the progress thread, as a broken path would; the engine then recovers as for any failed
  // path. Fails with kInvalidArgument for a bad peer/rail, a TCP communicator or no live QP.
  Status InjectQpError(int peer, int rail);
  // "channel C: STATE" per channel to `peer` on `rail` (STATE as ibv_query_qp reports it, or
  // "closed" once the engine dropped the connection).
  Result<std::vector<std::string>> QpStates(int peer, int rail);
  // The state of the first QP to `peer` on `rail` ("RTS", "ERR", ...; "closed"), for the hook.
  std::optional<std::string> FirstQpState(int peer, int rail);

 private:
  // The chunk size a send of `len` bytes is cut into (see kMinStripeChunk).
  size_t StripeChunk(size_t len) const;
  // A send op of `len` bytes from `buf` with its chunk CRCs: taken from `received`'s checked
  // frames where one covers exactly a chunk, computed otherwise.
  OpPtr MakeSend(int peer, const MsgKey& key, const Signature& sig, const void* buf, size_t len,
                 const Op* received);
  // A frame being written: its header, and a payload in the user's buffer or owned.
  struct TxItem {
    wire::FrameHeader hdr;
    const uint8_t* payload = nullptr;
    std::unique_ptr<uint8_t[]> owned;  // payload copies that must outlive the user's buffer
    uint32_t len = 0;
    bool is_data = false;
    uint64_t seq = 0;
    size_t sent = 0;  // bytes of header + payload written so far
  };
  // A message being received from a peer.
  struct RxMsg {
    MsgKey key;
    Signature sig;
    uint64_t len = 0;
    OpPtr recv;                          // the posted receive, if any yet
    StagingPool::Buffer staging;  // data that arrived before the receive was posted
    std::vector<Op::RxChunk> staged;  // chunks complete in staging, with their checked CRC
    uint64_t bytes_done = 0;
    bool any_chunk = false;
  };
  // The receive side of one connection: the frame being read.
  struct RxState {
    wire::FrameHeader hdr;
    size_t hdr_got = 0;
    bool in_payload = false;
    uint8_t* dst = nullptr;  // nullptr: discard
    size_t payload_got = 0;
    uint32_t crc = 0;  // CRC32C of the payload received so far (into dst)
    std::shared_ptr<RxMsg> msg;
    bool into_staging = false;
    // This copy of the chunk took over from another copy still being read (OnData), which was
    // discarded: if this one is lost too, the chunk must be asked for again (LoseRxCopy).
    bool took_over = false;
    std::string text;  // a control payload (SACK ranges, abort reason)
    void Reset() {
      hdr_got = 0;
      in_payload = false;
      took_over = false;
      payload_got = 0;
      crc = 0;
      dst = nullptr;
      msg.reset();
      text.clear();
    }
  };
  // The intra-host relay state of a relay connection (rail == num_rails_). It carries data
  // only while no direct path to the peer works. `initiator`: this rank opened it (it lost its
  // own rails) and closes it again; `on`: it carried the relay_on event.
  struct RelayState {
    bool initiator = false;
    bool on = false;
    int via = -1;
    size_t pick = 0;                  // which neighbour to try next
    std::string reason;               // why it was opened, for its events
    Clock::time_point drain_since{};  // a direct path works again since
  };
  // One connection: a path to `peer` over `rail` and `channel`.
  struct Conn {
    std::unique_ptr<Link> link;  // null while the slot is empty (a relay not opened yet)
    int peer = -1;
    int rail = 0;
    int channel = 0;
    bool alive = true;
    bool blocked = false;  // waiting for EPOLLOUT (or for good, once a write failed)
    // A write found the peer's end gone (Flush): what it sent before is read first.
    Clock::time_point write_failed_at{};
    std::string write_error;
    bool half_closed = false;
    bool relay = false;     // the relay slot of its peer
    uint16_t conn_port = 0;  // the connecting end's port: names this connection in notices
    PathHealth health;
    PathRate rate;
    // The latest send time of a chunk delivered over this path: a chunk sent on another path
    // before it and still undelivered was overtaken (loss evidence, as TCP RACK's).
    Clock::time_point newest_delivered_sent{};
    // When bytes from the peer last arrived here. An answer to a probe travels behind them, in
    // order: while they arrive, a probe's answer is queued, not lost.
    Clock::time_point last_inbound{};
    // Earliest finish (LeaveToFaster): since when this path has left chunks to a faster one
    // without its rate being measured again, and until when it probes (takes its window
    // regardless).
    Clock::time_point left_since{};
    Clock::time_point probe_until{};
    // In doubt: a path on the same rail to the same host as this one went silent or was
    // reported down (DoubtSiblings). It takes no new data while another path works, until it
    // shows progress (a probe sent at once is answered, or its chunks acknowledged) or is
    // found suspect in its own time.
    bool doubtful = false;
    // This end's notice of the path's down went out while no path to the peer worked, so it
    // sits in a suspect connection's queue, maybe this one's: the first path back in use
    // repeats it (OnPong). Cleared then, and when this connection is up again or replaced.
    bool down_notice_stuck = false;
    // When HedgeCheck last copied its chunks elsewhere: not again until its transport shows
    // progress.
    Clock::time_point hedged_at{};
    // Transmit: control frames first, then data pulled from the peer's ready queue.
    std::deque<TxItem> ctrl;
    std::optional<TxItem> cur;
    RxState rx;
    // Set up again after a failure (the higher rank of the pair dials).
    bool reconnect = false;
    Clock::time_point next_connect{};
    Clock::time_point last_dial{};  // the last time it was connected afresh (Redial)
    // When its connection failed under a live peer and that counted as a down (epoch: not
    // since it was last installed): the peer's new connection soon after takes it back.
    Clock::time_point failed_down_at{};
    RelayState relay_state;
    // Fault hook: damage the next data frame written here; frames damaged so far, and when.
    std::optional<FramePart> corrupt_next;
    uint64_t corrupt_sent = 0;
    int64_t corrupt_last_ns = 0;
  };
  // A chunk of a send, from posting until acknowledged.
  struct TxChunk {
    OpPtr op;
    uint64_t offset = 0;
    uint32_t len = 0;
    wire::FrameHeader hdr;
    Clock::time_point sent_at;
    int conn = -1;
    int tx_count = 0;
    bool in_ready = false;
    // The payload's CRC is still to be computed: at the chunk's first hand-off to a path, just
    // before the kernel copies those bytes (set by PostSend, done by PullData).
    bool crc_pending = false;
    bool delivered = false;  // acknowledged as received: reached the peer, not resent
    int counted = -1;        // the connection whose outstanding bytes include this chunk
    // Every live connection a copy of this chunk was handed to, `conn` included. The receiver
    // keeps whichever copy it began reading last (OnData) and drops the others, so the copy it
    // depends on may be an older one than `conn`'s: when any of these connections is lost, the
    // chunk is sent again (LoseCopies).
    std::vector<int> copies;
  };
  struct Peer {
    std::vector<int> conns;
    uint64_t next_seq = 0;
    uint64_t sent_end = 0;  // every data chunk whose header was written to the peer is below this
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
    // The last valid frame from the peer on any connection: it lives. A connection set up again
    // is not (the kernel completes a handshake for a stopped process); only a frame is.
    Clock::time_point heard{};
    // The chunk whose acknowledgement was last asked for again over another path (HedgeCheck):
    // at most once per oldest unacknowledged chunk.
    uint64_t ack_asked_seq = UINT64_MAX;
    std::map<int, double> shares;       // connection -> share of the striping last announced
    bool gone = false;                  // no connection left
  };
  using HeaderHandler = void (Engine::*)(int ci);

  // Shared by the engine's files; each is one rule.
  static constexpr size_t kHdr = sizeof(wire::FrameHeader);
  static constexpr uint32_t kMaxFrame = 64u << 20;  // largest payload a frame may announce
  // The smallest piece a message is cut into to stripe it over every path (StripeChunk), and
  // the multiple its pieces are rounded to (a whole number of elements of any dtype).
  static constexpr size_t kMinStripeChunk = 64u << 10;
  static constexpr size_t kStripeAlign = 4096;
  static constexpr size_t kDiscardBytes = 1u << 20;  // where unwanted payload is read to
  // The progress thread's timer period: CheckTimers runs at most this often, and a thread that
  // did not get to run for 5 ticks does not judge silence (it may be its own).
  static constexpr auto kTick = std::chrono::milliseconds(10);
  // How long a connection whose write found the peer's end gone waits for its read side to
  // end it (the rest of what the peer sent, then the end of the stream): Flush, CheckTimers.
  static constexpr auto kWriteFailedGrace = std::chrono::milliseconds(100);
  // The rail field of a relay connection's hello (its path is rail num_rails, channel 0).
  static constexpr uint32_t kRelayHelloRail = 0xFFFF;

  // engine.cc: the progress loop, commands, completion and failure.
  void Loop();
  void RunCommands();
  void Post(std::function<void()> fn);
  // Waits (holding `lock` on mu_) until the progress thread has released the buffers of every
  // operation of collective `coll_seq` and later. Returns at once on the progress thread.
  void AwaitReleased(std::unique_lock<std::mutex>& lock, uint64_t coll_seq);
  // The progress thread was started and this is another thread.
  bool ElsewhereThanProgress() const {
    const std::thread::id id = progress_id_.load();
    return id != std::thread::id() && id != std::this_thread::get_id();
  }
  void Complete(const OpPtr& op, Status st);
  // Wakes the threads waiting on ops that completed during this pass of the loop.
  void FlushWakeups();
  // `lost`: the rank whose loss is the cause (this rank gave up on it, or a peer's abort named
  // it), -1 for none; the first one is kept (LostPeer) and passed on in the abort frames.
  void FailLocked(const Status& why, uint64_t coll_seq, int lost = -1);
  void Emit(EventKind kind, int peer, int rail, int channel, std::string reason);
  Status MismatchStatus(uint64_t coll_seq, int peer, const Signature& mine,
                        const Signature& theirs) const;
  std::string Label(const Conn& c) const;
  void WatchLink(int ci, bool write);
  // Takes the link out of the poll set and closes it: in an orderly way, or with `reset` by a
  // TCP reset (SocketLink::Reset). The peer reads an orderly close on a connection that had
  // no BYE as this process ending (ConnFailed, peer_closed): it gives the peer up when that
  // was its last path. A connection this end gives up while its process lives is reset, which
  // the peer reads as a broken path whose connection is set up again.
  void UnwatchLink(Conn& c, bool reset = false);
  bool Dead(uint64_t coll_seq) const { return failed_ && coll_seq >= fail_from_; }

  // tx.cc
  void PostSend(const OpPtr& op);
  void Kick(int peer);
  // Writes what `ci` has queued until it blocks, pulling at most `max_new_chunks` new data
  // chunks. Returns the number pulled.
  size_t Flush(int ci, size_t max_new_chunks = SIZE_MAX);
  bool PullData(int ci);
  // Whether `ci` should leave the next chunk to a faster path of its peer (LeaveToFaster),
  // with a probe every kProbeEvery.
  bool LeaveChunk(int ci);
  void ApplyWireFaults(int ci, TxItem* item, TxChunk& ch);
  int PickConn(int peer);
  void EnqueueCtrl(int peer, TxItem item);
  void SendAcks();
  uint64_t AckValue(const Peer& p) const;
  void HandleNack(int peer, uint64_t seq);
  // Asks `peer` to send chunk `seq` again.
  void SendNack(int peer, uint64_t seq);
  void DetachInflight(int peer, uint64_t seq);
  void Requeue(Peer& p, std::vector<uint64_t> seqs);
  // Moves `ch`'s bytes onto connection `ci`'s outstanding count (-1: onto none).
  void Count(TxChunk& ch, int ci);
  // Updates throughput estimates; announces a changed striping of `peer` as kRebalanced.
  void SampleRates(int peer, Clock::time_point now);
  // Measures at once a path whose chunks delivered at under 1/kCutRatio of its rate over
  // kCutBusy of busy time while another path to the peer keeps at least half its own, unless
  // its transport's latest delivery sample reads at least half its rate; copies what it holds
  // when a sibling would deliver it far sooner. True when a rate changed. Runs every tick,
  // and every hedge check, with hedging on (hedge_floor > 0): it acts on a sign, as a hedge,
  // and only on paths to other hosts (HedgesTo).
  bool CutSlowPaths(int peer, Clock::time_point now);
  static constexpr double kCutBusy = 0.02;  // seconds
  static constexpr double kCutRatio = 3;
  // A control frame of `type` about `c`'s path (rail << 16 | channel, and its port).
  TxItem PathNotice(wire::FrameType type, const Conn& c) const;

  // rx.cc
  void PostRecv(const OpPtr& op);
  void OnBegin(uint64_t coll_seq, const Signature& sig);
  void OnReadable(int ci);
  void OnHeader(int ci);
  // What this rank knows that frames from `peer` are checked against (frame_check.h).
  FrameContext FrameCtx(int peer) const;
  // A frame from `ci` lies (`why`, frame_check.h): the connection fails, the rest goes on.
  void RefuseFrame(int ci, const Status& why);
  void OnPayloadDone(int ci);
  void OnAck(int ci);
  void OnPing(int ci);
  void OnPong(int ci);
  void OnPathDownNotice(int ci);
  void OnRedialRequest(int ci);
  void OnNack(int ci);
  void OnBye(int ci);
  void OnAbort(int ci);
  void OnData(int ci);
  void OnUnknownFrame(int ci);
  void OnAckRanges(int ci);
  void OnAbortReason(int ci);
  void OnDataDone(int ci);
  void HandleAck(int peer, uint64_t cum, uint64_t delivered, int from_ci);
  // `ch` reached the peer: credits its connection with progress and a round-trip sample.
  void Credit(TxChunk& ch, Clock::time_point now);

  // paths.cc
  void CheckTimers();
  // Every millisecond while chunks are unacknowledged: a path whose transport stopped
  // acknowledging is hedged (Hedge), and an acknowledgement overdue for bytes the transport
  // delivered is asked for again over another path (CommOptions::hedge_floor).
  void HedgeCheck(Clock::time_point now);
  // Whether paths to `peer` are hedged: not to a rank of this host, whose paths go through
  // the kernel's loopback whatever rail they name (no rail's fault silences them), and where
  // the checks cost CPU that the ranks share (measured on loopback, 4 ranks on 2 cores: 2 to
  // 3 % of busbw and CPU per GB).
  bool HedgesTo(int peer) const { return hosts_[peer] != hosts_[rank_]; }
  // Copies `ci`'s unacknowledged chunks to the other paths, gives it (with `siblings`, also its
  // rail's paths to the same host: DoubtSiblings) no new data until it shows progress, and
  // sends acknowledgements elsewhere. Does not judge it: no event, no damping.
  void Hedge(int ci, Clock::time_point now, const std::string& why, bool siblings);
  // Takes a path out of use: its unacknowledged chunks move to the others, it is probed.
  // Tells the peer over a path that works that this end of the path is down.
  void NoticeDown(int ci);
  void MarkDown(int ci, Clock::time_point now, const std::string& reason);
  // After `ci` went down: probe the other working paths on its rail to ranks of its peer's
  // host, and give them no new data until they answer (Conn::doubtful).
  void DoubtSiblings(int ci, Clock::time_point now);
  // Counts a down of conns_[ci] for flap damping (PathHealth::RecordDown) and publishes the
  // damping of its peer and rail for Stats().
  void RecordDown(int ci, Clock::time_point now);
  // Takes back the down of conns_[ci] counted at `at` (PathHealth::WithdrawDown) and publishes
  // the damping again; false if it was not the latest.
  bool WithdrawDown(int ci, Clock::time_point at);
  // Publishes the damping of conns_[ci]'s peer and rail for Stats().
  void PublishDowns(int ci);
  // Whether no path to conns_[ci]'s peer other than conns_[ci] works (alive and not suspect).
  bool OnlyPath(int ci) const;
  // The last working path to `peer` went out of use: its suspect paths whose links are up are
  // probed at once, so that one held down by damping that still answers is taken back
  // (OnPong, PathHealth::Readmit) without waiting for the next probe round.
  void ProbeHeldPaths(int peer, Clock::time_point now);
  // A suspect connection whose own retransmissions back off (Link::BackingOff) while its path
  // is up again is connected afresh: the higher rank redials, the lower one asks it to.
  // `or_awaiting`: also when it waits for its first retransmission (Link::AwaitingRetransmission).
  void RedialIfBackingOff(int ci, Clock::time_point now, const std::string& why,
                          bool or_awaiting = false);
  // A connection broke. `peer_closed`: the peer closed it in order (its process is ending), so
  // it is not set up again.
  void ConnFailed(int ci, const std::string& reason, bool peer_closed = false);
  // Returns how many unacknowledged chunks moved to the other paths.
  // `reset`: the link is reset rather than closed (UnwatchLink).
  size_t DropQuietly(int ci, bool reset = false);
  // Connection `ci` is gone: the chunks of its peer that must be sent again, and no chunk's
  // copy is on it any more. `delivered_too`: also chunks whose latest copy was on it that are
  // known delivered.
  std::vector<uint64_t> LoseCopies(int ci, bool delivered_too);
  // Connection `ci` is gone with the chunk it was reading, if any: returns the chunk to ask
  // for again (SendNack), or -1. Call before its receive state is reset.
  int64_t LoseRxCopy(int ci);
  void PeerGone(int peer, const std::string& reason);
  void SendPing(int ci, Clock::time_point now);
  void Progress(Conn& c, Clock::time_point now);
  Clock::duration SuspectTimeout(const Conn& c) const;
  // The suspicion timeout of a path overtaken by another (PathHealth::OvertakenTimeout).
  Clock::duration FastSuspectTimeout(const Conn& c) const;
  // A rail's link went up or down: its paths go down at once, or are probed (or redialled).
  void SetRailLink(int rail, bool up);
  // The rail's link is down, or up but not yet settled (link_settle): nothing is sent from it.
  bool RailQuiet(int rail) const;
  // What a rail's link change means for its connections, once an up link has settled.
  void RailLinkChanged(int rail, bool up, bool long_down, Clock::time_point now);

  // reconnect.cc: connections set up again through the backend.
  void StartReconnect(int ci, Clock::time_point now);
  // How long a reconnect attempt on this connection waits for its handshake.
  Clock::duration ConnectTimeout(const Conn& c) const;
  void OnSetupEvents();
  void OnDialed(SetupEvent ev);
  void OnHello(SetupEvent ev);
  // A suspect connection that stays silent is replaced by a fresh one rather than waiting for
  // its socket's retransmission backoff (seconds after a long outage): the higher rank closes
  // it (DropQuietly: no events, it is already down) and connects again; the lower rank asks it
  // to (kRedial) when its rail comes back.
  void Redial(int ci, const std::string& why);
  // Puts a freshly established link into slot `ci`: suspect until it answers a probe.
  void Install(int ci, std::unique_ptr<Link> link, uint16_t conn_port);

  // relay.cc. CheckRelay opens the relay path to `peer` when every rail of this rank is down
  // and closes it once a direct path works again.
  void CheckRelay(int peer, Clock::time_point now);
  void StartRelay(int ci, Clock::time_point now);
  void CloseRelay(int ci, const std::string& why);
  // A relayed connection that ends: its chunks move back to the direct paths.
  void RelayFailed(int ci, const std::string& reason);
  // A relay from `peer` arrived (its rails are down): it replaces the relay slot.
  void AcceptRelay(int peer, std::unique_ptr<Link> link, bool same_host);
  bool OwnRailsLost() const;
  // The relay path answered its first probe.
  void RelayWorks(int ci);

  // fault_hook.cc: has the progress thread read one path's state and, with `arm`, arm
  // conn_corrupt on one of its live connections; waits for the answer until `deadline`.
  Result<PathFaultState> HookPath(int peer, int rail, std::optional<FramePart> arm,
                                  Deadline deadline);
  void DamageForHook(Conn& c, TxItem* item);

  const CommOptions options_;
  const int rank_;
  const int size_;
  const int num_rails_;
  const uint64_t comm_id_;
  const PathHealth::Params health_params_;
  const std::unique_ptr<Backend> backend_;
  const char* const tag_;  // the backend's log prefix

  // Buffers of messages that arrive before their receive; declared before everything that
  // holds one (conns_, peers_), so it outlives them.
  StagingPool staging_pool_{32u << 20};
  std::vector<Conn> conns_;
  std::vector<Peer> peers_;
  net::Fd epoll_;
  net::Fd wake_;
  std::thread thread_;
  bool started_ = false;
  // The progress thread, once started (never reset, so other threads may read it at any time).
  std::atomic<std::thread::id> progress_id_{};
  bool stopping_ = false;  // progress thread: shutdown requested
  bool begun_ = false;     // progress thread: a collective has begun
  uint64_t cur_seq_ = 0;   // progress thread: the collective begun last
  Signature cur_sig_;
  std::unique_ptr<uint8_t[]> discard_;
  std::mt19937_64 rng_;
  Clock::time_point last_check_{};  // progress thread: the previous CheckTimers
  // progress thread: chunks were unacknowledged at the last HedgeCheck (or posted since), and
  // when the next one is due.
  bool hedge_watch_ = false;
  Clock::time_point next_hedge_{};
  static constexpr auto kHedgeEvery = std::chrono::milliseconds(1);
  static constexpr uint64_t kHedgeSmall =
      4096;  // a path holding at most this is hedged at the floor
  static constexpr uint64_t kHedgeCopyBytes = 1u << 20;  // at most this copied by one hedge
  // HedgeCheck's, by connection, kept to spare an allocation per check.
  std::vector<Clock::time_point> hedge_waiting_;
  std::vector<std::optional<Link::TransportAcks>> hedge_acks_;
  // How late this thread's own ticks have been lately (ms, decaying): on an overloaded host
  // the peers are as late to answer, and silence means less.
  double tick_lag_ms_ = 0;

  std::mutex cmd_mu_;
  std::vector<std::function<void()>> cmds_;

  mutable std::mutex mu_;  // guards error_ and op completion
  std::condition_variable cv_;
  bool wake_due_ = false;  // progress thread only: a waited op completed in this pass
  Status error_;
  int lost_peer_ = -1;  // guarded by mu_
  std::atomic<bool> failed_{false};
  // The failure concerns collectives from this one on; earlier ones still in flight finish
  // normally (a peer that is ahead may abort the next collective while this rank completes
  // the current one). Guarded by mu_ for writers; read by the progress thread.
  std::atomic<uint64_t> fail_from_{UINT64_MAX};
  // Guarded by mu_, written by the progress thread: the buffers of every operation of the
  // collectives from this one on are released (FailLocked ran for them, or the thread ended).
  uint64_t released_from_ = UINT64_MAX;
  bool fail_handled_ = false;  // progress thread: FailLocked ran
  bool abort_sent_ = false;  // progress thread

  // Statistics (written by the progress thread).
  std::atomic<uint64_t> st_frames_sent_{0}, st_frames_recv_{0}, st_retx_{0}, st_crc_{0},
      st_dups_{0}, st_ooo_{0}, st_acks_{0}, st_nacks_{0}, st_staged_{0};
  // Payload bytes whose send CRC was computed (by the progress thread, at a chunk's first
  // hand-off), and those whose CRC a forward took from the frame they arrived in (by the
  // posting threads).
  std::atomic<uint64_t> st_tx_crc_bytes_{0}, st_tx_crc_reused_bytes_{0};
  std::unique_ptr<std::atomic<uint64_t>[]> st_rail_bytes_;
  std::unique_ptr<std::atomic<double>[]> st_peer_rate_;  // by rank (CommStats)
  // By rank x rail (CommStats::path_downs_in_window, ...), written by RecordDown.
  std::unique_ptr<std::atomic<uint32_t>[]> st_downs_;
  std::unique_ptr<std::atomic<int64_t>[]> st_first_down_ns_;
  std::unique_ptr<std::atomic<int64_t>[]> st_hold_until_ns_;
  // By rank (CommStats::chunks_numbered_per_peer, ...), written by the progress thread.
  std::unique_ptr<std::atomic<uint64_t>[]> st_numbered_, st_accepted_, st_rx_cum_, st_tx_acked_;
  std::vector<PathLoad> leave_scratch_;  // LeaveChunk's, kept to spare an allocation per chunk

  std::mutex events_mu_;
  std::vector<Event> events_;

  // Link state of the rails' interfaces, when watched.
  std::unique_ptr<LinkWatch> link_watch_;
  std::vector<uint32_t> rail_ips_;  // by rail, network byte order
  std::vector<bool> rail_up_;
  std::vector<Clock::time_point> rail_down_at_;  // by rail: when its link went down last
  // By rail: when a link that came up has settled (its paths are then probed), and whether it
  // had been down long enough for its connections to be dialled afresh.
  std::vector<Clock::time_point> rail_settle_at_;
  std::vector<bool> rail_settle_long_;
  std::atomic<uint64_t> rails_up_mask_{~0ull};  // rail_up_ for other threads (rails < 64)
  // Intra-host relay.
  std::vector<uint64_t> hosts_;  // host key by rank
  std::vector<int> relay_slot_;  // by peer: its relay connection, -1 without
  std::vector<int> neighbours_;  // the other ranks of this host
  bool serving_relays_ = false;
};

}  // namespace ftccl::transport::engine
