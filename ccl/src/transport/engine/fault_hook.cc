// The FaultTarget operations of the chunk engine (transport/fault_target.h): faults a rank
// causes on its own connections because the kernel cannot cause them from outside.
#include <time.h>

#include <condition_variable>
#include <mutex>

#include "transport/engine/engine.h"

namespace ftccl::transport::engine {

Result<PathFaultState> Engine::QueryPath(int peer, int rail, Deadline deadline) {
  auto s = HookPath(peer, rail, std::nullopt, deadline);
  if (s.ok() && backend_->queue_pairs()) s->qp_state = FirstQpState(peer, rail);
  return s;
}

Result<PathFaultState> Engine::CorruptNextFrame(int peer, int rail, FramePart part,
                                                Deadline deadline) {
  return HookPath(peer, rail, part, deadline);
}

Result<PathFaultState> Engine::HookPath(int peer, int rail, std::optional<FramePart> arm,
                                        Deadline deadline) {
  if (peer < 0 || peer >= size_ || peer == rank_ || rail < 0 || rail >= num_rails_) {
    return InvalidArgument("no connection to rank " + std::to_string(peer) + " on rail " +
                           std::to_string(rail));
  }
  struct Reply {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<Result<PathFaultState>> r;
    bool abandoned = false;  // the caller gave up waiting: arm nothing
  };
  auto reply = std::make_shared<Reply>();
  Post([this, reply, peer, rail, arm] {
    std::lock_guard<std::mutex> lock(reply->mu);
    if (reply->abandoned) return;
    PathFaultState s;
    s.corrupt_frames_sent = 0;
    int target = -1;
    for (int ci : peers_[peer].conns) {
      const Conn& c = conns_[ci];
      if (c.rail != rail) continue;
      *s.corrupt_frames_sent += c.corrupt_sent;
      s.applied_ns = std::max(s.applied_ns, c.corrupt_last_ns);
      s.corrupt_pending |= c.corrupt_next.has_value();
      if (c.alive && (target < 0 || (conns_[target].health.suspect && !c.health.suspect))) {
        target = ci;
      }
    }
    Result<PathFaultState> r = s;
    if (arm && target < 0) {
      r = PeerLost("no live connection to rank " + std::to_string(peer) + " on rail " +
                   std::to_string(rail));
    } else if (arm) {
      conns_[target].corrupt_next = *arm;
      r->corrupt_pending = true;
    }
    reply->r = std::move(r);
    reply->cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(reply->mu);
  if (!reply->cv.wait_until(lock, deadline, [&] { return reply->r.has_value(); })) {
    // The command still runs once the progress thread gets to it: it must then do nothing, or
    // a fault reported as refused would be applied after all.
    reply->abandoned = true;
    return Timeout("the transport's progress thread did not answer the fault hook in time");
  }
  return std::move(*reply->r);
}

void Engine::DamageForHook(Conn& c, TxItem* item) {
  if (*c.corrupt_next == FramePart::kHeader) {
    item->hdr.length ^= 0x40;  // the header no longer matches its checksum
  } else {
    item->hdr.payload_crc ^= 0x5A5A5A5A;  // a well-formed header whose payload fails its check
    item->hdr.header_crc = wire::HeaderCrc(item->hdr);
  }
  c.corrupt_next.reset();
  c.corrupt_sent++;
  c.corrupt_last_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

Status Engine::InjectQpError(int peer, int rail) {
  if (!backend_->queue_pairs()) {
    return InvalidArgument(
        "qp_error needs the verbs transport (FTCCL_TRANSPORT=verbs); this communicator uses " +
        std::string(backend_->name()));
  }
  if (peer < 0 || peer >= size_ || peer == rank_ || rail < 0 || rail >= num_rails_) {
    return InvalidArgument("qp_error: no connection to rank " + std::to_string(peer) + " on rail " +
                           std::to_string(rail) + " (rank " + std::to_string(rank_) + " of " +
                           std::to_string(size_) + ", " + std::to_string(num_rails_) + " rails)");
  }
  return RunOnProgress([this, peer, rail]() -> Status {
    int n = 0;
    for (int ci : peers_[peer].conns) {
      Conn& c = conns_[ci];
      if (c.rail != rail || !c.alive || !c.link) continue;
      FTCCL_RETURN_IF_ERROR(c.link->ForceError());
      ++n;
    }
    if (n == 0) {
      return InvalidArgument("qp_error: no live QP to rank " + std::to_string(peer) + " on rail " +
                             std::to_string(rail));
    }
    return Status::Ok();
  });
}

Result<std::vector<std::string>> Engine::QpStates(int peer, int rail) {
  if (!backend_->queue_pairs()) {
    return InvalidArgument("this communicator uses the " + std::string(backend_->name()) +
                           " transport: no QPs");
  }
  if (peer < 0 || peer >= size_ || peer == rank_ || rail < 0 || rail >= num_rails_) {
    return InvalidArgument("no connection to rank " + std::to_string(peer) + " on rail " +
                           std::to_string(rail));
  }
  // Shared: a request that times out may still run later.
  auto out = std::make_shared<std::vector<std::string>>();
  Status st = RunOnProgress([this, peer, rail, out]() -> Status {
    for (int ci : peers_[peer].conns) {
      const Conn& c = conns_[ci];
      if (c.rail != rail) continue;
      std::string state = c.link ? c.link->State() : "closed";
      if (!c.alive) state += " (connection dropped)";
      out->push_back("channel " + std::to_string(c.channel) + ": " + state);
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return *out;
}

Result<PathFaultState> Engine::InjectQpError(int peer, int rail, Deadline deadline) {
  (void)deadline;  // InjectQpError bounds its own wait on the progress thread
  if (!backend_->queue_pairs()) return Unsupported();
  FTCCL_RETURN_IF_ERROR(InjectQpError(peer, rail));
  PathFaultState s;
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  s.applied_ns = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  s.qp_state = FirstQpState(peer, rail);
  return s;
}

std::optional<std::string> Engine::FirstQpState(int peer, int rail) {
  auto states = QpStates(peer, rail);
  if (!states.ok() || states->empty()) return std::nullopt;
  // "channel 0: ERR (connection dropped)" -> "ERR"
  const std::string& line = states->front();
  size_t from = line.find(": ");
  if (from == std::string::npos) return line;
  from += 2;
  return line.substr(from, line.find(' ', from) - from);
}

}  // namespace ftccl::transport::engine
