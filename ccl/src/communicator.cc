#include "ftccl/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "algo/algo.h"
#include "bootstrap.h"
#include "fault_hook.h"
#include "grow_id.h"
#include "log.h"
#include "net.h"
#include "transport/factory.h"

namespace ftccl {
namespace {

// How long Wait() gives a running collective past its deadline before it fails the
// communicator itself: the collective thread enforces the deadline, so this only matters when
// that thread is late (an overloaded host), never in the normal course.
constexpr auto kWaitGrace = std::chrono::seconds(5);

class RequestImpl;

// A queued collective whose deadline passed before the collectives ahead of it were done.
Status NotStarted(uint64_t seq, const transport::Signature& sig) {
  return Timeout("collective #" + std::to_string(seq) + " " + sig.ToString() +
                 " did not start before its deadline (the collectives before it took the time)");
}

struct Task {
  transport::Signature sig;
  Clock::time_point deadline;
  std::function<Status(const algo::Ctx&)> run;
  std::shared_ptr<RequestImpl> req;
  Status invalid;  // set when the arguments were rejected before queueing
};

}  // namespace

class Communicator::Impl {
 public:
  explicit Impl(CommOptions o) : options_(std::move(o)) {}
  ~Impl() { Close(); }

  // A communicator joined as `group` says: key 0 for a new one, the shrink's or grow's key for
  // one made from a parent (Create, Shrink, Grow and Join).
  static Result<std::unique_ptr<Communicator>> Make(CommOptions options, const GroupKey& group);
  Status Init(const GroupKey& group);
  RequestPtr Submit(transport::Signature sig, Millis timeout, Status invalid,
                    std::function<Status(const algo::Ctx&)> run);
  void Abort(const std::string& reason);
  void Revoke(const std::string& reason);
  bool revoked() const { return revoked_.load(); }
  Result<std::unique_ptr<Communicator>> Shrink(const std::vector<int>& excluded, Millis timeout);
  Result<std::string> GrowId(int new_size);
  Result<std::unique_ptr<Communicator>> Grow(const std::string& grow_id, Millis timeout);
  // A request's Wait reached its deadline and `req` is still queued: it is taken out and fails
  // (and with it the communicator, as the ranks' sequences of collectives now differ).
  void DropQueued(const RequestImpl* req);
  // A request's Wait reached its deadline plus the grace and `req` is still running: the
  // communicator fails, which ends the collective at once.
  void InterruptRunning(const RequestImpl* req);
  CommStats Stats() const { return transport_->Stats(); }
  int LostPeer() const { return transport_->LostPeer(); }
  std::vector<Event> DrainEvents() { return transport_->DrainEvents(); }
  Status InjectQpError(int peer, int rail) { return transport_->InjectQpError(peer, rail); }
  Result<std::vector<std::string>> QpStates(int peer, int rail) { return transport_->QpStates(peer, rail); }
  void Close();

  CommOptions options_;
  uint64_t comm_id_ = 0;
  int num_rails_ = 0;
  std::weak_ptr<Impl> self_;  // handed to requests

 private:
  // Ends the running, queued and later collectives with `why` here and on the peers.
  void FailFromCurrent(const Status& why);

  void WorkerLoop();

  std::unique_ptr<transport::engine::Engine> transport_;
  std::unique_ptr<FaultHookServer> hook_;  // stopped before the transport shuts down
  std::thread worker_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool stop_ = false;
  uint64_t next_seq_ = 0;                   // the sequence number the next task starts with
  const RequestImpl* running_ = nullptr;    // the task the worker runs, if any
  uint64_t running_seq_ = 0;
  algo::Scratch scratch_;  // worker thread
  // Shrink: every rank's spare bootstrap listener (its management address) and this rank's own,
  // and how many shrinks of this communicator were started (part of each shrink's key).
  std::vector<net::Endpoint> spares_;
  net::Fd spare_;
  std::mutex shrink_mu_;
  uint64_t shrinks_ = 0;
  uint64_t grows_ = 0;  // guarded by shrink_mu_: grows started (part of each grow's key)
  std::atomic<bool> revoked_{false};
  std::string revoke_reason_;  // guarded by mu_; the first Revoke's
};

namespace {

class RequestImpl final : public Request {
 public:
  RequestImpl(Clock::time_point deadline, std::weak_ptr<Communicator::Impl> comm)
      : deadline_(deadline), comm_(std::move(comm)) {}

  bool Test() override {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  // Returns only once the operation is over: the communicator then holds no pointer into its
  // buffers. At the deadline a task that has not started is dropped; a running one gets the
  // grace to end on its own (its thread enforces the same deadline), then the communicator
  // fails, which ends it at once.
  Status Wait() override {
    std::unique_lock<std::mutex> lock(mu_);
    auto done = [&] { return done_; };
    if (!cv_.wait_until(lock, deadline_, done)) {
      lock.unlock();
      if (auto comm = comm_.lock()) comm->DropQueued(this);
      lock.lock();
      if (!cv_.wait_until(lock, deadline_ + kWaitGrace, done)) {
        lock.unlock();
        if (auto comm = comm_.lock()) comm->InterruptRunning(this);
        lock.lock();
        // A failed communicator ends the collective within its thread's reaction time, and a
        // destroyed one has finished every request.
        cv_.wait(lock, done);
      }
    }
    return status_;
  }
  Status WaitUntil(Clock::time_point deadline) override {
    if (deadline >= deadline_) return Wait();
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_until(lock, deadline, [&] { return done_; })) {
      return Timeout("operation still running at the caller's deadline (its buffers are still in use)");
    }
    return status_;
  }
  void Finish(Status st) {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = std::move(st);
    done_ = true;
    cv_.notify_all();
  }

 private:
  const Clock::time_point deadline_;
  const std::weak_ptr<Communicator::Impl> comm_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Status status_;
};

}  // namespace

Status Communicator::Impl::Init(const GroupKey& group) {
  const CommOptions& o = options_;
  if (o.size < 1) return InvalidArgument("size must be at least 1, got " + std::to_string(o.size));
  if (o.rank < 0 || o.rank >= o.size) {
    return InvalidArgument("rank " + std::to_string(o.rank) + " is outside [0, " +
                           std::to_string(o.size) + ")");
  }
  if (o.rails.empty()) return InvalidArgument("at least one rail address or interface is required");
  if (o.channels_per_rail < 1) return InvalidArgument("channels_per_rail must be at least 1");
  if (o.chunk_bytes < 1024) return InvalidArgument("chunk_bytes must be at least 1024");
  if (o.slice_bytes < 1024) return InvalidArgument("slice_bytes must be at least 1024");
  if (o.transport != "tcp" && o.transport != "verbs") {
    return InvalidArgument("transport must be tcp or verbs, got '" + o.transport + "'");
  }
  if (o.verbs_qp_timeout < 1 || o.verbs_qp_timeout > 31 || o.verbs_retry_count < 0 || o.verbs_retry_count > 7) {
    return InvalidArgument("verbs_qp_timeout must be in [1, 31] and verbs_retry_count in [0, 7]");
  }
  if (o.size > 1 && !(o.rank == 0 && o.bootstrap_listen_fd >= 0)) {
    auto ep = net::ParseEndpoint(o.bootstrap);
    if (!ep.ok()) return ep.status().WithContext("bootstrap");
  }
  log::SetRank(o.rank);
  if (!o.fault_hook.empty()) {
    // Bound before joining, so that an unusable path fails at once.
    auto hook = FaultHookServer::Open(o.fault_hook);
    if (!hook.ok()) return hook.status();
    hook_ = std::move(hook.value());
  }
  const auto deadline = Clock::now() + o.init_timeout;
  std::vector<uint32_t> ips;
  for (const auto& rail : o.rails) {
    auto ip = net::ResolveRailAddress(rail);
    if (!ip.ok()) return ip.status();
    ips.push_back(ip.value());
  }
  auto listeners = transport::OpenListeners(ips);
  if (!listeners.ok()) return listeners.status();
  std::vector<net::Endpoint> mine;
  for (auto& l : listeners.value()) mine.push_back(l.second);

  BootstrapTable table;
  std::unique_ptr<Bootstrap> boot;
  if (o.size == 1) {
    table.comm_id = 1;
    table.size = 1;
    table.num_rails = static_cast<int>(mine.size());
    table.rails = {mine};
    if (o.bootstrap_listen_fd >= 0) {
      // A group shrunk to one rank keeps its parent's listener: a later grow meets there.
      net::Fd spare(dup(o.bootstrap_listen_fd));
      if (!spare.valid()) return ErrnoStatus("dup(bootstrap_listen_fd)", errno);
      auto at = net::LocalEndpoint(spare.get());
      if (!at.ok()) return at.status();
      table.spares = {at.value()};
      spare_ = std::move(spare);
    }
  } else {
    auto b = Bootstrap::Join(o, mine, group, deadline);
    if (!b.ok()) return b.status();
    boot = std::move(b.value());
    table = boot->table();
  }
  auto t = transport::Connect(o, table, std::move(listeners.value()), ips, deadline);
  Status st = t.ok() ? Status::Ok() : t.status();
  if (boot) st = boot->Ready(st, deadline);
  if (!st.ok()) return st;
  transport_ = std::move(t.value());
  FTCCL_RETURN_IF_ERROR(transport_->Start());
  comm_id_ = table.comm_id;
  num_rails_ = table.num_rails;
  spares_ = table.spares;
  if (boot) spare_ = boot->TakeSpare();
  if (hook_) FTCCL_RETURN_IF_ERROR(hook_->Start(transport_.get(), o.rank, o.size, num_rails_));
  worker_ = std::thread([this] { WorkerLoop(); });
  LOG_INFO("INIT", "communicator %016lx ready: rank %d of %d, %d rails x %d channels",
           static_cast<unsigned long>(comm_id_), o.rank, o.size, num_rails_, o.channels_per_rail);
  return Status::Ok();
}

RequestPtr Communicator::Impl::Submit(transport::Signature sig, Millis timeout, Status invalid,
                                      std::function<Status(const algo::Ctx&)> run) {
  if (timeout.count() <= 0) timeout = options_.op_timeout;
  Task task;
  task.sig = sig;
  task.deadline = Clock::now() + timeout;
  task.run = std::move(run);
  task.req = std::make_shared<RequestImpl>(task.deadline, self_);
  task.invalid = std::move(invalid);
  RequestPtr req = task.req;
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) {
    task.req->Finish(Aborted("communicator destroyed"));
    return req;
  }
  if (revoked_) {
    // Whatever failed before the revocation, the caller learns why this communicator is out of
    // use (and that it was revoked on purpose, not by a fault of its own).
    Status before = transport_->error();
    task.req->Finish(Aborted("communicator revoked: " + revoke_reason_ +
                             (before.ok() || before.message().find("communicator revoked") == 0
                                  ? std::string()
                                  : " (it had failed before: " + before.ToString() + ")")));
    return req;
  }
  queue_.push_back(std::move(task));
  cv_.notify_all();
  return req;
}

void Communicator::Impl::WorkerLoop() {
  for (;;) {
    Task task;
    uint64_t seq;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
      seq = next_seq_++;
      running_ = task.req.get();
      running_seq_ = seq;
    }
    // Not the communicator's error in general: one that concerns only a later collective (a
    // peer ahead aborted it) leaves this one to run, as the other ranks need it to.
    Status st = transport_->ErrorFor(seq);
    if (st.ok() && !task.invalid.ok()) {
      // A bad argument on one rank: fail the communicator so the others learn it at once
      // instead of waiting for their deadline.
      st = task.invalid.WithContext("rank " + std::to_string(options_.rank) + ", collective #" +
                                    std::to_string(seq) + " " + task.sig.ToString());
      transport_->Fail(st, seq);
    } else if (st.ok() && Clock::now() >= task.deadline) {
      // Its wait has given up or is about to: it must not start on buffers the caller may
      // already have freed.
      st = NotStarted(seq, task.sig);
      transport_->Fail(st, seq);
    } else if (st.ok()) {
      algo::Ctx ctx;
      ctx.t = transport_.get();
      ctx.scratch = &scratch_;
      ctx.rank = options_.rank;
      ctx.size = options_.size;
      ctx.coll_seq = seq;
      ctx.sig = task.sig;
      ctx.deadline = task.deadline;
      ctx.slice_bytes = options_.slice_bytes;
      ctx.small_allreduce_bytes = options_.small_allreduce_bytes;
      transport_->Begin(seq, task.sig);
      st = task.run(ctx);
      if (!st.ok()) {
        Status sticky = transport_->ErrorFor(seq);
        if (sticky.ok()) {
          st = st.WithContext("collective #" + std::to_string(seq) + " " + task.sig.ToString());
        }
        // Always, also when the communicator already failed (a peer ahead of this rank aborted
        // a later collective): only this makes the transport let go of this collective's
        // buffers before the caller gets them back.
        transport_->Fail(st, seq);
        if (!sticky.ok()) st = sticky;
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_ = nullptr;
    }
    task.req->Finish(st);
  }
}

void Communicator::Impl::DropQueued(const RequestImpl* req) {
  std::unique_lock<std::mutex> lock(mu_);
  if (stop_) return;  // Close finishes every queued request
  auto it = std::find_if(queue_.begin(), queue_.end(),
                         [&](const Task& t) { return t.req.get() == req; });
  if (it == queue_.end()) return;
  const uint64_t seq = next_seq_ + static_cast<uint64_t>(it - queue_.begin());
  Task task = std::move(*it);
  queue_.erase(it);
  lock.unlock();
  Status st = NotStarted(seq, task.sig);
  transport_->Fail(st, seq);
  task.req->Finish(st);
}

void Communicator::Impl::InterruptRunning(const RequestImpl* req) {
  std::unique_lock<std::mutex> lock(mu_);
  if (stop_ || running_ != req) return;
  const uint64_t seq = running_seq_;
  lock.unlock();
  LOG_WARN("COLL", "collective #%lu is still running %ld s past its deadline: failing the communicator",
           static_cast<unsigned long>(seq), static_cast<long>(kWaitGrace.count()));
  transport_->Fail(Timeout("collective #" + std::to_string(seq) +
                           " did not end within its deadline"), seq);
}

void Communicator::Impl::FailFromCurrent(const Status& why) {
  uint64_t seq;
  {
    // The running collective, or the next one when none runs: it and every later one fail, on
    // this rank and (told by abort frames) on the others.
    std::lock_guard<std::mutex> lock(mu_);
    seq = running_ != nullptr ? running_seq_ : next_seq_;
  }
  transport_->Fail(why, seq);
}

void Communicator::Impl::Abort(const std::string& reason) {
  FailFromCurrent(Aborted("aborted by the application: " + reason));
}

void Communicator::Impl::Revoke(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!revoked_) revoke_reason_ = reason;
    revoked_ = true;
  }
  FailFromCurrent(Aborted("communicator revoked: " + reason));
}

Result<std::unique_ptr<Communicator>> Communicator::Impl::Shrink(const std::vector<int>& excluded,
                                                                 Millis timeout) {
  const int size = options_.size;
  const int me = options_.rank;
  std::vector<bool> out(size, false);
  for (int r : excluded) {
    if (r < 0 || r >= size) {
      return InvalidArgument("shrink: excluded rank " + std::to_string(r) + " is outside [0, " +
                             std::to_string(size) + ")");
    }
    if (r == me) return InvalidArgument("shrink: this rank (" + std::to_string(me) + ") excludes itself");
    if (out[r]) return InvalidArgument("shrink: rank " + std::to_string(r) + " is excluded twice");
    out[r] = true;
  }
  std::lock_guard<std::mutex> serial(shrink_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return Aborted("shrink: the communicator is being destroyed");
  }
  std::vector<int> survivors;
  std::string names;
  for (int r = 0; r < size; ++r) {
    if (!out[r]) {
      survivors.push_back(r);
    } else {
      names += (names.empty() ? "" : ",") + std::to_string(r);
    }
  }
  // Whatever still runs on the old communicator ends now, here and on every peer a path
  // reaches: the survivors meet afresh, the excluded ranks learn they are out.
  Revoke(names.empty() ? std::string("shrinking (no rank excluded)")
                       : "shrinking without ranks " + names);
  const int new_size = static_cast<int>(survivors.size());
  const int new_rank = static_cast<int>(
      std::find(survivors.begin(), survivors.end(), me) - survivors.begin());
  // Every survivor computes the same key from the same inputs; a rank that excludes other ranks
  // (or is at another shrink of this communicator) has another key and is refused by the root.
  uint64_t key = comm_id_ ^ 0x9E3779B97F4A7C15ull;
  auto mix = [&key](uint64_t v) {
    key ^= v + 0x9E3779B97F4A7C15ull + (key << 6) + (key >> 2);
    key *= 0xBF58476D1CE4E5B9ull;
  };
  mix(++shrinks_);
  mix(static_cast<uint64_t>(size));
  for (int r = 0; r < size; ++r) {
    if (out[r]) mix(static_cast<uint64_t>(r));
  }
  if (key == 0) key = 1;

  CommOptions o = options_;
  o.rank = new_rank;
  o.size = new_size;
  if (timeout.count() > 0) o.init_timeout = timeout;
  o.bootstrap_listen_fd = -1;
  if (new_size == 1 && spare_.valid()) {
    o.bootstrap_listen_fd = spare_.get();  // kept (a duplicate) for a later grow
  } else if (new_size > 1) {
    if (new_rank == 0) {
      if (!spare_.valid()) return Internal("shrink: this rank has no listener for the new group");
      o.bootstrap_listen_fd = spare_.get();  // the bootstrap takes a duplicate
    } else {
      const net::Endpoint& root = spares_[survivors[0]];
      if (root.ip == 0 || root.port == 0) {
        return Internal("shrink: no listener address of rank " + std::to_string(survivors[0]));
      }
      o.bootstrap = root.ToString();
    }
  }
  // The fault hook's path belongs to the new communicator now.
  hook_.reset();
  LOG_INFO("INIT", "communicator %016lx: shrinking to %d ranks without [%s]: this rank becomes %d",
           static_cast<unsigned long>(comm_id_), new_size, names.c_str(), new_rank);
  GroupKey group;
  group.key = key;
  auto next = Make(std::move(o), group);
  if (!next.ok()) return next.status().WithContext("shrink");
  return next;
}

Result<std::string> Communicator::Impl::GrowId(int new_size) {
  if (new_size <= options_.size) {
    return InvalidArgument("grow: the new size " + std::to_string(new_size) +
                           " is not larger than the current " + std::to_string(options_.size));
  }
  std::lock_guard<std::mutex> serial(shrink_mu_);
  if (options_.size > 1 && (spares_.empty() || spares_[0].ip == 0 || spares_[0].port == 0)) {
    return Internal("grow: no listener address of rank 0");
  }
  if (options_.size == 1 && (spares_.empty() || !spare_.valid())) {
    return InvalidArgument("grow: this communicator of one rank was created alone and has no "
                           "bootstrap listener to grow from");
  }
  GrowTicket t;
  t.comm_id = comm_id_;
  t.epoch = grows_ + 1;
  t.old_size = options_.size;
  t.new_size = new_size;
  t.root = spares_[0];
  t.key = GrowKey(t.comm_id, t.epoch, t.old_size, t.new_size);
  return t.ToString();
}

Result<std::unique_ptr<Communicator>> Communicator::Impl::Grow(const std::string& grow_id,
                                                               Millis timeout) {
  auto parsed = ParseGrowId(grow_id);
  if (!parsed.ok()) return parsed.status();
  const GrowTicket& t = parsed.value();
  std::lock_guard<std::mutex> serial(shrink_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return Aborted("grow: the communicator is being destroyed");
    if (revoked_) return Aborted("grow: the communicator is revoked: " + revoke_reason_);
  }
  if (t.comm_id != comm_id_ || t.old_size != options_.size || spares_.empty() ||
      t.root.ip != spares_[0].ip || t.root.port != spares_[0].port) {
    return InvalidArgument("grow: the grow id belongs to another communicator");
  }
  if (t.epoch != grows_ + 1) {
    return InvalidArgument("grow: the grow id is for grow #" + std::to_string(t.epoch) +
                           " of this communicator, but the next is #" +
                           std::to_string(grows_ + 1));
  }
  // Every member counts this grow, whatever its outcome, so that a later grow's key differs
  // and a joiner still holding this one's id is refused then.
  ++grows_;
  CommOptions o = options_;
  o.size = t.new_size;
  if (timeout.count() > 0) o.init_timeout = timeout;
  o.bootstrap_listen_fd = -1;
  if (o.rank == 0) {
    if (!spare_.valid()) return Internal("grow: this rank has no listener for the new group");
    o.bootstrap_listen_fd = spare_.get();  // the bootstrap takes a duplicate
  } else {
    o.bootstrap = t.root.ToString();
  }
  // A fault hook path can be served by one communicator only: the new one takes it.
  if (!o.fault_hook.empty()) hook_.reset();
  GroupKey group;
  group.key = t.key;
  group.joiner_key = JoinerKey(t.key);
  group.first_joiner = t.old_size;
  LOG_INFO("INIT", "communicator %016lx: growing from %d to %d ranks (grow #%lu)",
           static_cast<unsigned long>(comm_id_), t.old_size, t.new_size,
           static_cast<unsigned long>(t.epoch));
  auto next = Make(std::move(o), group);
  if (!next.ok()) return next.status().WithContext("grow");
  return next;
}

Result<std::unique_ptr<Communicator>> Communicator::Impl::Make(CommOptions options,
                                                               const GroupKey& group) {
  auto impl = std::make_shared<Impl>(std::move(options));
  impl->self_ = impl;
  Status st = impl->Init(group);
  if (!st.ok()) return st;
  return std::unique_ptr<Communicator>(new Communicator(std::move(impl)));
}

void Communicator::Impl::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
    cv_.notify_all();
  }
  if (transport_ && worker_.joinable()) {
    // Pending work fails fast once the transport is shut down.
    std::deque<Task> rest;
    {
      std::lock_guard<std::mutex> lock(mu_);
      rest.swap(queue_);
    }
    for (auto& t : rest) t.req->Finish(Aborted("communicator destroyed"));
  }
  hook_.reset();
  if (transport_) transport_->Shutdown();
  if (worker_.joinable()) worker_.join();
}

// ---------------------------------------------------------------------------------------------

Result<std::unique_ptr<Communicator>> Communicator::Create(CommOptions options) {
  Status env = ApplyEnvOverrides(&options);
  if (!env.ok()) return env;
  return Impl::Make(std::move(options), GroupKey{});
}

Result<std::unique_ptr<Communicator>> Communicator::Join(CommOptions options,
                                                         const std::string& grow_id) {
  Status env = ApplyEnvOverrides(&options);
  if (!env.ok()) return env;
  auto parsed = ParseGrowId(grow_id);
  if (!parsed.ok()) return parsed.status().WithContext("join");
  const GrowTicket& t = parsed.value();
  if (options.size == 0) options.size = t.new_size;
  if (options.size != t.new_size) {
    return InvalidArgument("join: size " + std::to_string(options.size) +
                           " differs from the grow's new size " + std::to_string(t.new_size));
  }
  if (options.rank < t.old_size || options.rank >= t.new_size) {
    return InvalidArgument("join: rank " + std::to_string(options.rank) +
                           " is not a joiner's rank (" + std::to_string(t.old_size) + ".." +
                           std::to_string(t.new_size - 1) + ")");
  }
  options.bootstrap = t.root.ToString();
  options.bootstrap_listen_fd = -1;
  GroupKey group;
  group.key = t.key;
  group.joiner_key = JoinerKey(t.key);
  group.first_joiner = t.old_size;
  auto made = Impl::Make(std::move(options), group);
  if (!made.ok()) return made.status().WithContext("join");
  return made;
}

Communicator::Communicator(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
// Closed here, not when the last reference goes: a request's Wait may hold one for a moment.
Communicator::~Communicator() { impl_->Close(); }

int Communicator::rank() const { return impl_->options_.rank; }
int Communicator::size() const { return impl_->options_.size; }
uint64_t Communicator::id() const { return impl_->comm_id_; }
int Communicator::num_rails() const { return impl_->num_rails_; }
const CommOptions& Communicator::options() const { return impl_->options_; }
CommStats Communicator::Stats() const { return impl_->Stats(); }
std::vector<Event> Communicator::DrainEvents() { return impl_->DrainEvents(); }
Status Communicator::InjectQpError(int peer, int rail) { return impl_->InjectQpError(peer, rail); }
Result<std::vector<std::string>> Communicator::QpStates(int peer, int rail) {
  return impl_->QpStates(peer, rail);
}
Result<std::string> Communicator::GrowId(int new_size) { return impl_->GrowId(new_size); }
Result<std::unique_ptr<Communicator>> Communicator::Grow(const std::string& grow_id,
                                                       Millis timeout) {
  return impl_->Grow(grow_id, timeout);
}
void Communicator::Abort(const std::string& reason) { impl_->Abort(reason); }
void Communicator::Revoke(const std::string& reason) { impl_->Revoke(reason); }
bool Communicator::revoked() const { return impl_->revoked(); }
int Communicator::LostPeer() const { return impl_->LostPeer(); }
Result<std::unique_ptr<Communicator>> Communicator::Shrink(const std::vector<int>& excluded,
                                                         Millis timeout) {
  return impl_->Shrink(excluded, timeout);
}

namespace {

transport::Signature Sig(CollKind kind, DataType dt, ReduceOp op, int root, size_t count) {
  transport::Signature s;
  s.kind = kind;
  s.dtype = dt;
  s.op = op;
  s.root = root;
  s.count = count;
  return s;
}

Status CheckArgs(const void* send, const void* recv, size_t count, DataType dt, ReduceOp op,
                 int root, int size, bool need_recv = true) {
  if (static_cast<int>(dt) >= kNumDataTypes) {
    return InvalidArgument("unknown data type " + std::to_string(static_cast<int>(dt)));
  }
  if (static_cast<int>(op) >= kNumReduceOps) {
    return InvalidArgument("unknown reduction " + std::to_string(static_cast<int>(op)));
  }
  if (root < 0 || root >= size) {
    return InvalidArgument("root " + std::to_string(root) + " is outside [0, " + std::to_string(size) + ")");
  }
  if (count > 0 && (send == nullptr || (need_recv && recv == nullptr))) {
    return InvalidArgument("null buffer for a non-empty collective");
  }
  if (count > (size_t{1} << 40)) return InvalidArgument("count " + std::to_string(count) + " is too large");
  return Status::Ok();
}

}  // namespace

RequestPtr Communicator::AllReduceAsync(const void* send, void* recv, size_t count, DataType dt,
                                        ReduceOp op, Millis timeout) {
  return impl_->Submit(Sig(CollKind::kAllReduce, dt, op, 0, count), timeout,
                       CheckArgs(send, recv, count, dt, op, 0, size()),
                       [=](const algo::Ctx& c) { return algo::AllReduce(c, send, recv, count, dt, op); });
}

RequestPtr Communicator::AllGatherAsync(const void* send, void* recv, size_t count, DataType dt,
                                        Millis timeout) {
  return impl_->Submit(Sig(CollKind::kAllGather, dt, ReduceOp::kSum, 0, count), timeout,
                       CheckArgs(send, recv, count, dt, ReduceOp::kSum, 0, size()),
                       [=](const algo::Ctx& c) { return algo::AllGatherRing(c, send, recv, count, dt); });
}

RequestPtr Communicator::ReduceScatterAsync(const void* send, void* recv, size_t count,
                                            DataType dt, ReduceOp op, Millis timeout) {
  return impl_->Submit(Sig(CollKind::kReduceScatter, dt, op, 0, count), timeout,
                       CheckArgs(send, recv, count, dt, op, 0, size()),
                       [=](const algo::Ctx& c) { return algo::ReduceScatterRing(c, send, recv, count, dt, op); });
}

RequestPtr Communicator::BroadcastAsync(const void* send, void* recv, size_t count, DataType dt,
                                        int root, Millis timeout) {
  Status args = CheckArgs(rank() == root ? send : recv, recv, count, dt, ReduceOp::kSum, root, size());
  return impl_->Submit(Sig(CollKind::kBroadcast, dt, ReduceOp::kSum, root, count), timeout, args,
                       [=](const algo::Ctx& c) { return algo::BroadcastChain(c, send, recv, count, dt, root); });
}

RequestPtr Communicator::ReduceAsync(const void* send, void* recv, size_t count, DataType dt,
                                     ReduceOp op, int root, Millis timeout) {
  Status args = CheckArgs(send, recv, count, dt, op, root, size(), rank() == root);
  return impl_->Submit(Sig(CollKind::kReduce, dt, op, root, count), timeout, args,
                       [=](const algo::Ctx& c) { return algo::ReduceChain(c, send, recv, count, dt, op, root); });
}

RequestPtr Communicator::AllToAllAsync(const void* send, void* recv, size_t count, DataType dt,
                                       Millis timeout) {
  return impl_->Submit(Sig(CollKind::kAllToAll, dt, ReduceOp::kSum, 0, count), timeout,
                       CheckArgs(send, recv, count, dt, ReduceOp::kSum, 0, size()),
                       [=](const algo::Ctx& c) { return algo::AllToAllPairwise(c, send, recv, count, dt); });
}

RequestPtr Communicator::BarrierAsync(Millis timeout) {
  return impl_->Submit(Sig(CollKind::kBarrier, DataType::kU8, ReduceOp::kSum, 0, 0), timeout,
                       Status::Ok(), [](const algo::Ctx& c) { return algo::BarrierAll(c); });
}

Status Communicator::AllReduce(const void* send, void* recv, size_t count, DataType dt,
                               ReduceOp op, Millis timeout) {
  return AllReduceAsync(send, recv, count, dt, op, timeout)->Wait();
}
Status Communicator::AllGather(const void* send, void* recv, size_t count, DataType dt,
                               Millis timeout) {
  return AllGatherAsync(send, recv, count, dt, timeout)->Wait();
}
Status Communicator::ReduceScatter(const void* send, void* recv, size_t count, DataType dt,
                                   ReduceOp op, Millis timeout) {
  return ReduceScatterAsync(send, recv, count, dt, op, timeout)->Wait();
}
Status Communicator::Broadcast(const void* send, void* recv, size_t count, DataType dt, int root,
                               Millis timeout) {
  return BroadcastAsync(send, recv, count, dt, root, timeout)->Wait();
}
Status Communicator::Reduce(const void* send, void* recv, size_t count, DataType dt, ReduceOp op,
                            int root, Millis timeout) {
  return ReduceAsync(send, recv, count, dt, op, root, timeout)->Wait();
}
Status Communicator::AllToAll(const void* send, void* recv, size_t count, DataType dt,
                              Millis timeout) {
  return AllToAllAsync(send, recv, count, dt, timeout)->Wait();
}
Status Communicator::Barrier(Millis timeout) { return BarrierAsync(timeout)->Wait(); }

}  // namespace ftccl
