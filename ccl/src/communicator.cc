#include "ftccl/communicator.h"

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "algo/algo.h"
#include "bootstrap.h"
#include "fault_hook.h"
#include "log.h"
#include "net.h"
#include "transport/factory.h"

namespace ftccl {
namespace {

class RequestImpl final : public Request {
 public:
  explicit RequestImpl(Clock::time_point deadline) : deadline_(deadline) {}

  bool Test() override {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  Status Wait() override {
    // The collective thread enforces the deadline itself; the grace covers its reaction time.
    return WaitUntil(deadline_ + std::chrono::seconds(5));
  }
  Status WaitUntil(Clock::time_point deadline) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_until(lock, deadline, [&] { return done_; })) {
      return Timeout("operation did not complete before the deadline");
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
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Status status_;
};

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

  Status Init();
  RequestPtr Submit(transport::Signature sig, Millis timeout, Status invalid,
                    std::function<Status(const algo::Ctx&)> run);
  void Abort(const std::string& reason) {
    transport_->Fail(Aborted("aborted by the application: " + reason), next_seq_);
  }
  CommStats Stats() const { return transport_->Stats(); }
  std::vector<Event> DrainEvents() { return transport_->DrainEvents(); }
  Status InjectQpError(int peer, int rail) { return transport_->InjectQpError(peer, rail); }
  Result<std::vector<std::string>> QpStates(int peer, int rail) { return transport_->QpStates(peer, rail); }
  void Close();

  CommOptions options_;
  uint64_t comm_id_ = 0;
  int num_rails_ = 0;

 private:
  void WorkerLoop();

  std::unique_ptr<transport::engine::Engine> transport_;
  std::unique_ptr<FaultHookServer> hook_;  // stopped before the transport shuts down
  std::thread worker_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool stop_ = false;
  uint64_t next_seq_ = 0;  // worker thread
  algo::Scratch scratch_;  // worker thread
};

Status Communicator::Impl::Init() {
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
  } else {
    auto b = Bootstrap::Join(o, mine, deadline);
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
  task.req = std::make_shared<RequestImpl>(task.deadline);
  task.invalid = std::move(invalid);
  RequestPtr req = task.req;
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) {
    task.req->Finish(Aborted("communicator destroyed"));
    return req;
  }
  queue_.push_back(std::move(task));
  cv_.notify_all();
  return req;
}

void Communicator::Impl::WorkerLoop() {
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    const uint64_t seq = next_seq_++;
    Status st = transport_->error();
    if (st.ok() && !task.invalid.ok()) {
      // A bad argument on one rank: fail the communicator so the others learn it at once
      // instead of waiting for their deadline.
      st = task.invalid.WithContext("rank " + std::to_string(options_.rank) + ", collective #" +
                                    std::to_string(seq) + " " + task.sig.ToString());
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
      transport_->Begin(seq, task.sig);
      st = task.run(ctx);
      if (!st.ok()) {
        Status sticky = transport_->error();
        if (sticky.ok()) {
          st = st.WithContext("collective #" + std::to_string(seq) + " " + task.sig.ToString());
          transport_->Fail(st, seq);
        } else {
          st = sticky;
        }
      }
    }
    task.req->Finish(st);
  }
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
  auto impl = std::make_unique<Impl>(std::move(options));
  Status st = impl->Init();
  if (!st.ok()) return st;
  return std::unique_ptr<Communicator>(new Communicator(std::move(impl)));
}

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Communicator::~Communicator() = default;

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
void Communicator::Abort(const std::string& reason) { impl_->Abort(reason); }

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
                       [=](const algo::Ctx& c) { return algo::AllReduceRing(c, send, recv, count, dt, op); });
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
