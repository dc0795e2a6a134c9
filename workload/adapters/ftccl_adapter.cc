// The ftccl adapter: one ftccl::Communicator over every rail given. Every collective carries
// its own deadline; after an error the communicator is sticky and later calls fail fast. The
// FTCCL_* environment overrides the options built from CclInit (ftccl::ApplyEnvOverrides).
// ftccl reports what its data path did about faults (path down, migrated, resumed, path up,
// failback, abort) and keeps data-path counters; DrainEvents and Stats hand them on.
// Shrink replaces the communicator with ftccl's Shrink of it; the adapter keeps the map from
// the new ranks to the group's original ones, so events and LostRank speak in those.
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ftccl/communicator.h"
#include "ftccl/version.h"
#include "workload/adapters/ccl_adapter.h"

namespace faultline::workload::adapters {
namespace {

// The library's error as a Status; its own code name stays in the message.
Status FromFtccl(const ftccl::Status& st) {
  if (st.ok()) return Status::Ok();
  if (st.code() == ftccl::Code::kInvalidArgument) return InvalidArgument(st.ToString());
  if (st.code() == ftccl::Code::kInternal) return Internal(st.ToString());
  return Unavailable(st.ToString());
}

class FtcclAdapter final : public CclAdapter {
 public:
  std::string Name() const override { return "ftccl"; }
  std::string Version() const override { return ftccl::Version(); }

  Status Init(const CclInit& init) override {
    if (!init.allreduce_algorithm.empty()) {
      return InvalidArgument("ftccl: no choice of allreduce algorithm ('" +
                             init.allreduce_algorithm + "')");
    }
    ftccl::CommOptions o;
    o.rank = init.rank;
    o.size = init.size;
    o.bootstrap = init.bootstrap;
    o.bootstrap_listen_fd = init.bootstrap_listen_fd;
    o.rails = init.rails;
    o.init_timeout = ftccl::Millis(init.init_timeout.count());
    o.op_timeout = ftccl::Millis(init.op_timeout.count());
    o.fault_hook = init.fault_hook;
    if (init.peer_loss_timeout.count() > 0) {
      o.abort_timeout = ftccl::Millis(init.peer_loss_timeout.count());
    }
    const ftccl::Status env = ftccl::ApplyEnvOverrides(&o);
    if (!env.ok()) return FromFtccl(env).WithContext("ftccl environment");
    auto comm = ftccl::Communicator::Create(std::move(o));
    if (!comm.ok()) return FromFtccl(comm.status());
    comm_ = std::move(comm).value();
    members_.clear();
    for (int r = 0; r < init.size; ++r) members_.push_back(r);
    world_size_ = init.size;
    return Status::Ok();
  }

  bool CanShrink() const override { return true; }

  int LostRank() const override {
    if (comm_ == nullptr) return -1;
    const int lost = comm_->LostPeer();
    return lost >= 0 && lost < static_cast<int>(members_.size()) ? members_[lost] : -1;
  }

  Status Shrink(const std::vector<int>& excluded, std::chrono::milliseconds timeout) override {
    if (comm_ == nullptr) return Internal("ftccl: Shrink before Init (or after Abort)");
    std::vector<int> current;  // the excluded ranks in the communicator's own numbering
    for (int g : excluded) {
      auto it = std::find(members_.begin(), members_.end(), g);
      if (it == members_.end()) {
        return InvalidArgument("ftccl: rank " + std::to_string(g) + " is not in the group");
      }
      current.push_back(static_cast<int>(it - members_.begin()));
    }
    auto next = comm_->Shrink(current, ftccl::Millis(timeout.count()));
    if (!next.ok()) return FromFtccl(next.status());
    // The old communicator's last events and counters stay this rank's.
    for (CclEvent& e : TranslatedEvents()) pending_.push_back(std::move(e));
    for (const auto& [name, value] : Stats()) earlier_[name] = value;
    std::vector<int> kept;
    for (size_t r = 0; r < members_.size(); ++r) {
      if (std::find(current.begin(), current.end(), static_cast<int>(r)) == current.end()) {
        kept.push_back(members_[r]);
      }
    }
    // The revoked communicator is kept until the adapter goes: tearing it down now would put
    // its goodbyes (and the wait for relay sessions through the left-out rank) on the
    // survivors' critical path, and a left-out rank that wakes up reads on its connections
    // the abort that names it, rather than connections closed under it.
    retired_.push_back(std::move(comm_));
    comm_ = std::move(next).value();
    members_ = std::move(kept);
    return Status::Ok();
  }

  bool CanGrow() const override { return true; }

  Result<std::string> GrowId(const std::vector<int>& joiners) override {
    if (comm_ == nullptr) return Internal("ftccl: GrowId before Init (or after Abort)");
    auto id = comm_->GrowId(comm_->size() + static_cast<int>(joiners.size()));
    if (!id.ok()) return FromFtccl(id.status());
    return id.value();
  }

  Status Grow(const std::string& grow_id, const std::vector<int>& joiners,
              std::chrono::milliseconds timeout) override {
    if (comm_ == nullptr) return Internal("ftccl: Grow before Init (or after Abort)");
    for (int g : joiners) {
      if (g < 0 || g >= world_size_ ||
          std::find(members_.begin(), members_.end(), g) != members_.end()) {
        return InvalidArgument("ftccl: rank " + std::to_string(g) + " cannot join the group");
      }
    }
    auto next = comm_->Grow(grow_id, ftccl::Millis(timeout.count()));
    if (!next.ok()) return FromFtccl(next.status());
    for (CclEvent& e : TranslatedEvents()) pending_.push_back(std::move(e));
    for (const auto& [name, value] : Stats()) earlier_[name] = value;
    // The parent is idle and healthy: it goes now (its goodbyes are orderly).
    comm_ = std::move(next).value();
    members_.insert(members_.end(), joiners.begin(), joiners.end());
    return Status::Ok();
  }

  Status JoinGrown(const CclInit& init, const std::string& grow_id,
                   const std::vector<int>& members) override {
    auto at = std::find(members.begin(), members.end(), init.rank);
    if (at == members.end()) return InvalidArgument("ftccl: this rank is not in the grown group");
    ftccl::CommOptions o;
    o.rank = static_cast<int>(at - members.begin());
    o.size = static_cast<int>(members.size());
    o.rails = init.rails;
    o.init_timeout = ftccl::Millis(init.init_timeout.count());
    o.op_timeout = ftccl::Millis(init.op_timeout.count());
    o.fault_hook = init.fault_hook;
    if (init.peer_loss_timeout.count() > 0) {
      o.abort_timeout = ftccl::Millis(init.peer_loss_timeout.count());
    }
    auto comm = ftccl::Communicator::Join(std::move(o), grow_id);
    if (!comm.ok()) return FromFtccl(comm.status());
    comm_ = std::move(comm).value();
    members_ = members;
    world_size_ = init.size;
    return Status::Ok();
  }

  Status Run(const OpArgs& a, std::chrono::milliseconds timeout) override {
    if (comm_ == nullptr) return Internal("ftccl: Run before Init (or after Abort)");
    const auto dt = ftccl::ParseDataType(DTypeName(a.dtype));
    const auto op = ftccl::ParseReduceOp(RedOpName(a.redop));
    if (!dt || !op) return InvalidArgument("ftccl: unsupported dtype or reduction");
    const ftccl::Millis t(timeout.count());
    switch (a.coll) {
      case Coll::kAllReduce:
        return FromFtccl(comm_->AllReduce(a.send, a.recv, a.count, *dt, *op, t));
      case Coll::kAllGather:
        return FromFtccl(comm_->AllGather(a.send, a.recv, a.count, *dt, t));
      case Coll::kReduceScatter:
        return FromFtccl(comm_->ReduceScatter(a.send, a.recv, a.count, *dt, *op, t));
      case Coll::kBroadcast:
        return FromFtccl(comm_->Broadcast(a.send, a.recv, a.count, *dt, a.root, t));
      case Coll::kAllToAll:
        return FromFtccl(comm_->AllToAll(a.send, a.recv, a.count, *dt, t));
    }
    return InvalidArgument("ftccl: unknown collective");
  }

  Status Barrier(std::chrono::milliseconds timeout) override {
    if (comm_ == nullptr) return Internal("ftccl: Barrier before Init (or after Abort)");
    return FromFtccl(comm_->Barrier(ftccl::Millis(timeout.count())));
  }

  void Abort(const std::string& reason) override {
    if (comm_ == nullptr) return;
    comm_->Abort(reason);
    comm_.reset();
  }

  bool EmitsEvents() const override { return true; }
  bool ReleasesBuffersOnReturn() const override { return true; }

  std::vector<CclEvent> DrainEvents() override {
    std::vector<CclEvent> out;
    out.swap(pending_);
    for (CclEvent& e : TranslatedEvents()) out.push_back(std::move(e));
    return out;
  }

  std::vector<double> PeerRates() const override {
    if (comm_ == nullptr) return {};
    const std::vector<double> now = comm_->Stats().peer_rate_bytes_per_s;
    std::vector<double> out(static_cast<size_t>(world_size_), 0.0);
    for (size_t r = 0; r < now.size() && r < members_.size(); ++r) {
      if (members_[r] >= 0 && members_[r] < world_size_)
        out[static_cast<size_t>(members_[r])] = now[r];
    }
    return out;
  }

  std::optional<FlapDamping> Damping() const override {
    if (comm_ == nullptr) return std::nullopt;
    const ftccl::CommOptions& o = comm_->options();
    FlapDamping d;
    d.holddown = std::chrono::milliseconds(o.failback_holddown.count());
    d.holddown_max = std::chrono::milliseconds(o.failback_holddown_max.count());
    d.window = std::chrono::milliseconds(o.flap_window.count());
    const ftccl::CommStats s = comm_->Stats();
    const int rails = comm_->num_rails();
    for (size_t i = 0; i < s.path_downs_in_window.size() && rails > 0; ++i) {
      if (s.path_downs_in_window[i] == 0) continue;
      const size_t r = i / static_cast<size_t>(rails);
      if (r >= members_.size()) continue;
      FlapDamping::Path p;
      p.peer = members_[r];
      p.path = static_cast<int>(i % static_cast<size_t>(rails));
      p.downs_in_window = static_cast<int>(s.path_downs_in_window[i]);
      p.first_down_ns = s.path_first_down_ns[i];
      p.hold_until_ns = s.path_hold_until_ns[i];
      d.paths.push_back(p);
    }
    return d;
  }

  // Cumulative over this rank's communicators (the one now and those it shrank from).
  std::vector<std::pair<std::string, uint64_t>> Stats() const override {
    if (comm_ == nullptr) return {};
    std::vector<std::pair<std::string, uint64_t>> out = CurrentStats();
    for (auto& [name, value] : out) {
      auto it = earlier_.find(name);
      if (it != earlier_.end()) value += it->second;
    }
    return out;
  }

 private:
  std::vector<std::pair<std::string, uint64_t>> CurrentStats() const {
    const ftccl::CommStats s = comm_->Stats();
    std::vector<std::pair<std::string, uint64_t>> out = {
        {"data_frames_sent", s.data_frames_sent},
        {"data_frames_received", s.data_frames_received},
        {"chunks_retransmitted", s.chunks_retransmitted},
        {"crc_errors", s.crc_errors},
        {"duplicates_dropped", s.duplicates_dropped},
        {"out_of_order", s.out_of_order},
        {"bytes_staged", s.bytes_staged},
        {"acks_sent", s.acks_sent},
        {"nacks_sent", s.nacks_sent},
        {"relay_payload_bytes_sent", s.relay_payload_bytes_sent},
        {"relay_bytes_forwarded", s.relay_bytes_forwarded},
    };
    // Sequence numbers by peer, named by the peer's rank in the original group.
    for (size_t r = 0; r < s.chunks_numbered_per_peer.size(); ++r) {
      const std::string peer =
          std::to_string(r < members_.size() ? members_[r] : static_cast<int>(r));
      out.emplace_back("chunks_numbered_to_rank" + peer, s.chunks_numbered_per_peer[r]);
      out.emplace_back("chunks_accepted_from_rank" + peer, s.chunks_accepted_per_peer[r]);
      out.emplace_back("rx_cumulative_from_rank" + peer, s.rx_cumulative_per_peer[r]);
      out.emplace_back("tx_acknowledged_to_rank" + peer, s.tx_acknowledged_per_peer[r]);
    }
    for (size_t r = 0; r < s.payload_bytes_sent_per_rail.size(); ++r) {
      out.emplace_back("payload_bytes_sent_rail" + std::to_string(r),
                       s.payload_bytes_sent_per_rail[r]);
    }
    return out;
  }

  // The communicator's events, its peers given in the group's original numbers.
  std::vector<CclEvent> TranslatedEvents() {
    std::vector<CclEvent> out;
    if (comm_ == nullptr) return out;
    for (const ftccl::Event& e : comm_->DrainEvents()) {
      CclEvent c;
      c.time_ns = e.time_ns;
      c.kind = ftccl::EventKindName(e.kind);
      c.path = e.rail;
      c.peer = e.peer >= 0 && e.peer < static_cast<int>(members_.size()) ? members_[e.peer] : -1;
      c.reason = e.reason;
      if (c.peer >= 0) c.reason = "rank " + std::to_string(c.peer) + ": " + c.reason;
      out.push_back(std::move(c));
    }
    return out;
  }

  std::vector<std::unique_ptr<ftccl::Communicator>> retired_;  // revoked by a shrink
  std::unique_ptr<ftccl::Communicator> comm_;
  std::vector<int> members_;       // the communicator's rank r is the group's rank members_[r]
  int world_size_ = 0;             // CclInit::size
  std::vector<CclEvent> pending_;  // events of a communicator shrunk from, not drained yet
  std::map<std::string, uint64_t> earlier_;  // counters of the communicators shrunk from
};

}  // namespace

std::unique_ptr<CclAdapter> NewFtcclAdapter() { return std::make_unique<FtcclAdapter>(); }

}  // namespace faultline::workload::adapters
