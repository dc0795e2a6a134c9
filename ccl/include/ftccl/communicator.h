// Communicator: a group of `size` ranks, each a process, connected over one or more rails.
//
// Create() bootstraps over TCP on the management address (rank 0 listens, the others connect,
// all exchange rail addresses), then opens `channels_per_rail` TCP connections per peer per
// rail. A progress thread per communicator owns every socket (epoll); collectives run in order
// on a collective thread; the calling thread only waits, always with a deadline.
//
// Collectives are issued in the same order with matching arguments on every rank. A mismatch
// (different collective, dtype, count, reduction or root) is detected and reported as
// Code::kMismatch on every rank that sees it, and the others are told to abort.
//
// Thread-safety: all methods may be called from any thread; operations are executed in the
// order they were issued. Buffers passed to an operation must stay valid and unmodified (send)
// or untouched (recv) until the operation completes.
//
// Buffer lifetime: once a blocking collective returns, or Request::Wait() returns (success,
// failure, timeout or abort), or Test() returns true, the library holds no pointer into that
// operation's buffers and never touches them again: the caller may free them. An operation
// that fails on one rank never reads or writes its buffers after that, even while peers still
// send, resend or relay its data. The only exception is WaitUntil() returning kTimeout before
// the operation's own deadline: the operation is still running and its buffers still lent.
//
// After an operation fails, the communicator is in a sticky error state: later operations fail
// fast with the same Status. It can always be destroyed; the destructor aborts pending work,
// joins its threads and closes every socket within a bounded time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ftccl/status.h"
#include "ftccl/types.h"

namespace ftccl {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

// Deliberate damage applied by the sender to its own frames, for protocol tests and the fault
// hook. Probabilities are per data frame; the random stream is seeded, so runs repeat.
struct WireFaults {
  double corrupt = 0;    // flip a payload byte after the CRC was computed
  double duplicate = 0;  // send the frame twice (the second copy on another connection if any)
  double reorder = 0;    // hold the frame back and send it after the next one
  uint64_t seed = 1;
};

// Every knob of the communicator, with its default. FTCCL_<NAME> environment variables
// override them (see ApplyEnvOverrides); EffectiveKnobs() lists the values in force.
struct CommOptions {
  int rank = -1;
  int size = 0;
  // "ip:port" of rank 0's bootstrap listener on the management network.
  std::string bootstrap;
  // Rank 0 only: an already listening socket to use instead of binding `bootstrap`.
  int bootstrap_listen_fd = -1;
  // Local rail endpoints: IPv4 addresses or interface names. Every rank has the same count.
  std::vector<std::string> rails;
  int channels_per_rail = 1;                  // FTCCL_CHANNELS_PER_RAIL
  size_t chunk_bytes = 256 * 1024;            // FTCCL_CHUNK_BYTES: largest payload of one frame
  size_t slice_bytes = 1024 * 1024;           // FTCCL_SLICE_BYTES: pipelining unit of ring steps
  // FTCCL_SMALL_ALLREDUCE_BYTES: an allreduce of at most this many bytes uses recursive
  // doubling (ceil(log2 n) exchanges of the whole buffer) instead of the ring (2(n-1) steps of
  // 1/n of it); 0: always the ring. Must be the same on every rank. The default is the
  // largest size at which bench/compare-small measured recursive doubling faster every time on
  // 2 rails at 4 and 8 ranks: 0.81 and 0.68 of the ring's time at 256 KiB; at 512 KiB it was
  // 0.97 and 0.89 in one run, 1.17 and 1.29 in another. Recursive doubling moves log2(n)
  // whole buffers per rank against the ring's 2(n-1)/n, so on bandwidth-bound rails the
  // crossover is lower: set it from a measurement on those rails.
  size_t small_allreduce_bytes = 256 * 1024;
  int socket_buffer_bytes = 4 * 1024 * 1024;  // FTCCL_SOCKET_BUFFER_BYTES: SO_SNDBUF/SO_RCVBUF, 0 = kernel
  Millis init_timeout{30000};                 // FTCCL_INIT_TIMEOUT_MS: bootstrap + connection setup
  // TCP: once every peer has a connection, the others get this much longer at init; a path
  // still missing then (a rail down at start) starts down and is set up when it works, as a
  // broken one is. 0: init waits for every connection (up to init_timeout), as verbs does.
  Millis init_path_grace{1000};               // FTCCL_INIT_PATH_GRACE_MS
  Millis op_timeout{60000};                   // FTCCL_OP_TIMEOUT_MS: default deadline of a collective
  // A path with something outstanding (a chunk not yet acknowledged, a probe not answered) that
  // shows no progress for its timeout is suspect: it carries no new data, its chunks move to the
  // other paths, and it is probed until it answers. The timeout follows the path's measured
  // round-trip time (srtt + 4 rttvar, as TCP's RTO), clamped to [floor, ceiling].
  Millis suspect_floor{60};                   // FTCCL_SUSPECT_FLOOR_MS
  Millis suspect_ceiling{500};                // FTCCL_SUSPECT_CEILING_MS
  // Before any path is judged, a path whose own transport stops acknowledging what it holds
  // (TCP: no new data acknowledged by the peer's kernel for srtt + 4 rttvar, and at least this
  // long) while another path to the peer works is left alone: its unacknowledged chunks are
  // copied to the other paths, it takes no new data until it shows progress again, and so do
  // the paths on its rail to the same host. A chunk whose bytes the transport delivered but
  // whose acknowledgement is this overdue has its acknowledgement asked for again over another
  // path. Nothing is judged: the path is still made suspect only by suspect_floor's rule.
  Millis hedge_floor{3};                      // FTCCL_HEDGE_FLOOR_MS (0: never)
  Millis heartbeat_interval{50};              // FTCCL_HEARTBEAT_INTERVAL_MS: probe a path that showed
                                              // no progress for this long, idle or not (0: never)
  // Failback with flap damping: a path that answers again returns to use after a hold-down of
  // failback_holddown x 2^(n-1), n = times it went down within flap_window, at most
  // failback_holddown_max; a path flapping every 100 ms soon stays out instead of thrashing.
  Millis failback_holddown{100};              // FTCCL_FAILBACK_HOLDDOWN_MS
  Millis failback_holddown_max{5000};         // FTCCL_FAILBACK_HOLDDOWN_MAX_MS
  Millis flap_window{5000};                   // FTCCL_FLAP_WINDOW_MS
  // A connection that fails (reset, timeout) is re-established by the higher rank every this
  // long until it is back or the peer is given up on (abort_timeout).
  // Bandwidth-aware striping: a path holds at most this much time of data at its measured
  // throughput (but at least two chunks), so a throttled path carries proportionally less and
  // the others take the rest. 0 turns the limit off (paths take what their sockets accept).
  Millis path_queue{25};                      // FTCCL_PATH_QUEUE_MS
  Millis reconnect_interval{100};             // FTCCL_RECONNECT_INTERVAL_MS
  Millis tcp_user_timeout{5000};              // FTCCL_TCP_USER_TIMEOUT_MS: the kernel fails a
                                              // connection whose data stays unacknowledged this
                                              // long (TCP_USER_TIMEOUT; 0: kernel default)
  Millis abort_timeout{2000};                 // FTCCL_ABORT_TIMEOUT_MS: no working path to a peer for
                                              // this long fails the communicator (kPeerLost)
  bool watch_links = true;                    // FTCCL_WATCH_LINKS: follow the rails' link state
                                              // (netlink) to detect a downed port at once
  // A rail whose link came up is probed (and its connections redialled) this long after: the
  // switch port behind it may forward only a moment later, and a first packet sent into that
  // moment loses its ARP request, which the kernel repeats only after retrans_time (1 s).
  Millis link_settle{20};                     // FTCCL_LINK_SETTLE_MS (0: at once)
  // FTCCL_RELAY: intra-host relay. When every rail of this rank is link-down (its NIC died)
  // and another rank of the same host (same host name and network namespace) still has one,
  // this rank's traffic goes through that rank: a Unix socket to it, and from there a TCP
  // connection out of the neighbour's own rail. Back to direct paths once a rail of its own
  // works again. Needs watch_links. Every rank serves relays for its host's ranks.
  bool relay = true;
  // FTCCL_TRANSPORT: "tcp", or "verbs" for RC queue pairs (RoCE v2) under the same chunk
  // protocol; every rail address must then be a GID of an RDMA port (e.g. an rxe device).
  std::string transport = "tcp";
  // FTCCL_VERBS_QP_TIMEOUT: the QP's local ACK timeout, 4.096 us * 2^x (14: 67 ms). Together
  // with the retry count it bounds how long a silent path takes to fail a QP with
  // IBV_WC_RETRY_EXC_ERR (about (retry_count + 1) x timeout: ~0.3 s by default).
  int verbs_qp_timeout = 14;
  int verbs_retry_count = 4;  // FTCCL_VERBS_RETRY_COUNT: transport retries, 0..7
  // FTCCL_BENCH_PAYLOAD_CRC: benchmarks only, never turn off in use. 0 stops computing and
  // checking the payload CRC32C of data frames (headers keep theirs), so bench/ can measure
  // what the check costs; a corrupted payload then goes undetected. Must be the same on every
  // rank (a checking receiver refuses an unchecked sender's frames).
  bool bench_payload_crc = true;
  WireFaults wire_faults;
  // FTCCL_FAULT_HOOK: a filesystem path at which this rank serves the fault-hook protocol
  // (injector/FAULT_HOOK.md: ping, query, conn_corrupt; qp_error answers "unsupported" on TCP)
  // on a Unix socket of mode 0600, removed when the communicator is destroyed. Empty: off.
  // A path that cannot hold a socket fails Create with kInvalidArgument.
  std::string fault_hook;
};

// Applies FTCCL_* environment overrides to `options`. Fails on a malformed value.
Status ApplyEnvOverrides(CommOptions* options);
// name -> value of every knob in force, for logs and reports.
std::vector<std::pair<std::string, std::string>> EffectiveKnobs(const CommOptions& options);

// Counters of the data path, cumulative over the communicator's life.
struct CommStats {
  uint64_t data_frames_sent = 0;
  uint64_t data_frames_received = 0;
  uint64_t chunks_retransmitted = 0;  // resent after a NACK, a timeout or a connection failure
  uint64_t crc_errors = 0;            // frames that failed their CRC and were dropped
  uint64_t duplicates_dropped = 0;    // chunks received twice, the later copy dropped
  uint64_t out_of_order = 0;          // chunks that arrived ahead of a missing one
  uint64_t bytes_staged = 0;          // payload that arrived before its receive was posted
  // Payload bytes whose CRC32C the sender computed, and those it took from the checked frame
  // they arrived in (a ring or chain forwarding what it received: no second read).
  uint64_t tx_crc_bytes = 0;
  uint64_t tx_crc_reused_bytes = 0;
  uint64_t acks_sent = 0;
  uint64_t nacks_sent = 0;
  std::vector<uint64_t> payload_bytes_sent_per_rail;
  uint64_t relay_payload_bytes_sent = 0;  // payload sent through a same-host rank (relay)
  uint64_t relay_bytes_forwarded = 0;     // bytes this rank relayed for its host's other ranks
  // By rank: the measured throughput to that peer in bytes per second, summed over its
  // working direct paths (each path's rate estimate: its capacity where it was seen saturated,
  // else the most it carried while busy); 0 for this rank and for a peer not measured yet
  // (no data sent to it, or its paths dialled afresh).
  std::vector<double> peer_rate_bytes_per_s;
  // Flap damping, by rank x rail (index peer * num_rails() + rail; of its channels, the one
  // with the most downs): how many times the path went down within flap_window as last
  // counted (at its latest down; 0: never down), when the oldest of those downs was, and until
  // when its hold-down keeps it out of use after it answers again (failback_holddown x
  // 2^(n-1), at most failback_holddown_max). Times are CLOCK_MONOTONIC ns, as Event::time_ns;
  // 0: none.
  std::vector<uint32_t> path_downs_in_window;
  std::vector<int64_t> path_first_down_ns;
  std::vector<int64_t> path_hold_until_ns;
  // Sequence numbers, by rank (0 for this rank), for checking that nothing is lost or taken
  // twice: data chunks numbered for that peer (every chunk of a send gets the next number;
  // a resend keeps its number), chunks from it accepted (CRC checked, not a duplicate: each
  // number should be accepted exactly once), the cumulative acknowledgement this rank gives it
  // (every chunk below was accepted), and the cumulative acknowledgement it gave this rank
  // (every chunk below reached it). Once every collective has completed on every rank, what
  // rank A numbered for B equals what B accepted from A and B's cumulative acknowledgement.
  std::vector<uint64_t> chunks_numbered_per_peer;
  std::vector<uint64_t> chunks_accepted_per_peer;
  std::vector<uint64_t> rx_cumulative_per_peer;
  std::vector<uint64_t> tx_acknowledged_per_peer;
};

// What the data path did about a fault, for the harness's metrics and for operators.
enum class EventKind : uint8_t {
  kPathDown = 0,  // a connection stopped working (link down, reset, no acknowledgement)
  kMigrated,      // its unacknowledged chunks were handed to the surviving paths
  kResumed,       // the first chunk was acknowledged after a path went down
  kRebalanced,    // striping weights changed
  kRelayOn,       // traffic goes through a peer on the same host
  kRelayOff,
  kPathUp,        // a path that was down answers again
  kFailback,      // data flows on a path again after it came back
  kAbort,         // the communicator failed; every pending operation returns an error
};
const char* EventKindName(EventKind kind);  // "path_down", "migrated", ...

struct Event {
  int64_t time_ns = 0;  // CLOCK_MONOTONIC
  EventKind kind = EventKind::kPathDown;
  int peer = -1;        // the rank at the other end; -1 when it concerns no single peer
  int rail = -1;        // -1 when it concerns no single rail
  int channel = -1;
  std::string reason;
};

// Handle of an asynchronous operation.
class Request {
 public:
  virtual ~Request() = default;
  // True once the operation has completed (successfully or not). Never blocks.
  virtual bool Test() = 0;
  // Waits until the operation is over and returns its Status; then its buffers are the
  // caller's again. Bounded by the operation's deadline: an operation still queued behind
  // others at its deadline is dropped (kTimeout) and never starts; one still running then is
  // ended by its own deadline, or a few seconds later by failing the communicator. Either
  // failure is sticky, as any failed collective: the ranks' sequences of collectives differ.
  virtual Status Wait() = 0;
  // Waits until completion or `deadline`, whichever is first. A `deadline` at or past the
  // operation's own is Wait(). On an earlier timeout returns kTimeout and the operation keeps
  // running, its buffers still in use: call Wait() (or Abort()) before freeing them.
  virtual Status WaitUntil(Clock::time_point deadline) = 0;
};
using RequestPtr = std::shared_ptr<Request>;

class Communicator final {
 public:
  // Bootstraps and connects. Blocks until every rank is connected (every path, or over TCP at
  // least one to each peer plus init_path_grace) or init_timeout passes.
  static Result<std::unique_ptr<Communicator>> Create(CommOptions options);
  ~Communicator();

  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int size() const;
  uint64_t id() const;
  int num_rails() const;
  const CommOptions& options() const;

  // `timeout` 0 means options().op_timeout. Counts are in elements.
  // send: count, recv: count.
  Status AllReduce(const void* send, void* recv, size_t count, DataType dt, ReduceOp op,
                   Millis timeout = Millis(0));
  // send: count, recv: count * size (rank i's block at i * count).
  Status AllGather(const void* send, void* recv, size_t count, DataType dt,
                   Millis timeout = Millis(0));
  // send: count * size, recv: count (this rank's reduced block).
  Status ReduceScatter(const void* send, void* recv, size_t count, DataType dt, ReduceOp op,
                       Millis timeout = Millis(0));
  // send: count (read on root only), recv: count on every rank.
  Status Broadcast(const void* send, void* recv, size_t count, DataType dt, int root,
                   Millis timeout = Millis(0));
  // send: count, recv: count (written on root only; may be null elsewhere).
  Status Reduce(const void* send, void* recv, size_t count, DataType dt, ReduceOp op, int root,
                Millis timeout = Millis(0));
  // send: count * size (block j goes to rank j), recv: count * size (block j came from rank j).
  Status AllToAll(const void* send, void* recv, size_t count, DataType dt,
                  Millis timeout = Millis(0));
  Status Barrier(Millis timeout = Millis(0));

  // Asynchronous forms: return at once; the Request reports completion.
  RequestPtr AllReduceAsync(const void* send, void* recv, size_t count, DataType dt, ReduceOp op,
                            Millis timeout = Millis(0));
  RequestPtr AllGatherAsync(const void* send, void* recv, size_t count, DataType dt,
                            Millis timeout = Millis(0));
  RequestPtr ReduceScatterAsync(const void* send, void* recv, size_t count, DataType dt,
                                ReduceOp op, Millis timeout = Millis(0));
  RequestPtr BroadcastAsync(const void* send, void* recv, size_t count, DataType dt, int root,
                            Millis timeout = Millis(0));
  RequestPtr ReduceAsync(const void* send, void* recv, size_t count, DataType dt, ReduceOp op,
                         int root, Millis timeout = Millis(0));
  RequestPtr AllToAllAsync(const void* send, void* recv, size_t count, DataType dt,
                           Millis timeout = Millis(0));
  RequestPtr BarrierAsync(Millis timeout = Millis(0));

  // Aborts the running collective, every queued one and every later one with kAborted, and
  // tells the peers, whose matching collectives then fail with kAborted too (at once where a
  // path to them works; otherwise by their own abort_timeout or deadline). Thread-safe; may be
  // called while another thread waits on a collective, and more than once (the first reason
  // wins). The waiting calls return within the collective thread's reaction time (no longer
  // than the slice in hand); the buffer-lifetime guarantee above holds for them.
  void Abort(const std::string& reason);

  // Revoke: as Abort (the running, queued and later collectives end with kAborted, here and on
  // every peer a path reaches), with the message "communicator revoked: <reason>"; the
  // communicator is then good only for Shrink() and destruction. Thread-safe.
  void Revoke(const std::string& reason);
  bool revoked() const;
  // The rank whose loss failed this communicator: the peer this rank gave up on (no working
  // path for abort_timeout, every connection closed without a goodbye), or the one named by
  // the abort of the peer that did; the first such. -1 when the failure concerned no lost rank
  // (a mismatch, a deadline, an abort by the application). What a survivor passes to Shrink
  // when one rank died or stopped; every survivor learns the same rank where one was lost.
  // rank() itself when a peer's abort named this rank: the others lost it (it was stopped or
  // cut off from them) and go on without it.
  int LostPeer() const;

  // Shrink: a new communicator of the ranks not in `excluded` (dead, paused or unreachable
  // ones), numbered in their old order (the lowest survivor becomes rank 0), over the same
  // rails and options. Every survivor calls it with the same `excluded` (in any order); it
  // revokes this communicator first, so whatever still ran on it ends. The survivors meet at
  // the spare listener the new rank 0 opened at the original bootstrap (on the address the
  // others reached it at), so no rank of the old group, rank 0 included, need be alive. Bounded
  // by `timeout` (0: options().init_timeout): a survivor that does not join in time fails the
  // shrink on every rank with kTimeout, naming it. A rank that excludes other ranks than the
  // new rank 0 does is refused (kInvalidArgument) and cannot break the others' group.
  // kInvalidArgument for a rank outside [0, size), listed twice, or this rank itself. This
  // communicator stays revoked and must still be destroyed; the new one is independent of it.
  // Not to be called concurrently with the destructor.
  Result<std::unique_ptr<Communicator>> Shrink(const std::vector<int>& excluded,
                                               Millis timeout = Millis(0));

  // Grow: a communicator of this one's ranks plus `new_size - size()` ranks that join from
  // outside (a repaired host's relaunched processes), in the manner of ncclCommGrow. The
  // members keep their ranks; the joiners take ranks size()..new_size-1, each the rank it
  // passes to Join. The members and the joiners pass the same grow id, which any member makes
  // with GrowId() and hands to the others out of band. The new group meets at the spare
  // listener this communicator's rank 0 opened at creation; rank 0 admits members holding the
  // id and joiners holding it for a joiner's rank, and refuses (that connection only,
  // kInvalidArgument naming why) a stale or foreign id, a joiner claiming a member's rank or a
  // joiner's rank already taken. Every member calls Grow with the same id; it is bounded by
  // `timeout` (0: options().init_timeout): a joiner that does not come, or dies before the new
  // group is connected, fails the grow on every rank (kTimeout naming the missing ranks, or
  // the failure of the connection setup), and this communicator stays usable: it is not
  // revoked, and a later grow takes a new id. On success the new communicator is independent
  // of this one, which the caller destroys when its collectives are done. The grown group
  // starts with no collective history: what the joiners missed (a model's parameters, the
  // step) is the application's to send, e.g. a Broadcast from a member. Same rails and
  // options as this one. Not to be called concurrently with Shrink or the destructor.
  Result<std::string> GrowId(int new_size);
  Result<std::unique_ptr<Communicator>> Grow(const std::string& grow_id, Millis timeout = Millis(0));
  // The joiner's side of a grow: `options` as for Create (rails, knobs; `size` 0 or the
  // grow's new size; `rank` one of the joiners' ranks; `bootstrap` is taken from the id).
  // Bounded by options.init_timeout. kInvalidArgument for a malformed or inconsistent id or
  // a rank that is not a joiner's; the root's refusal as above; kNetwork when the id's
  // listener is gone (its communicator destroyed) or did not admit this rank.
  static Result<std::unique_ptr<Communicator>> Join(CommOptions options,
                                                   const std::string& grow_id);

  CommStats Stats() const;
  // The events since  CommStats Stats() const;
  // The events since the last call, oldest first. Thread-safe.
  std::vector<Event> DrainEvents();

  // Fault hook, verbs transport only. InjectQpError moves the QPs to rank `peer` on `rail` into
  // IBV_QPS_ERR, as a broken path would; the communicator recovers on its other paths with no
  // data lost or duplicated. kInvalidArgument for a TCP communicator or a bad peer/rail.
  Status InjectQpError(int peer, int rail);
  // "channel C: STATE" for each channel to `peer` on `rail` (RTS, ERR, ... from ibv_query_qp).
  Result<std::vector<std::string>> QpStates(int peer, int rail);

  class Impl;

 private:
  explicit Communicator(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace ftccl
