#include "process_group_ftccl.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include <ctime>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace faultline::torch_ftccl {
namespace {

using c10d::OpType;

ftccl::DataType ToFtccl(at::ScalarType t, bool reduces) {
  switch (t) {
    case at::kFloat: return ftccl::DataType::kF32;
    case at::kDouble: return ftccl::DataType::kF64;
    case at::kHalf: return ftccl::DataType::kF16;
    case at::kBFloat16: return ftccl::DataType::kBF16;
    case at::kInt: return ftccl::DataType::kI32;
    case at::kLong: return ftccl::DataType::kI64;
    case at::kByte: return ftccl::DataType::kU8;
    case at::kBool:
    case at::kChar:
      // Moved as bytes; a reduction over them would be u8 arithmetic, which is not theirs.
      TORCH_CHECK(!reduces, "ftccl: no reduction over ", t, " tensors");
      return ftccl::DataType::kU8;
    default:
      TORCH_CHECK(false, "ftccl: unsupported tensor type ", t);
  }
}

ftccl::ReduceOp ToFtccl(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return ftccl::ReduceOp::kSum;
    case c10d::ReduceOp::AVG: return ftccl::ReduceOp::kAvg;
    case c10d::ReduceOp::PRODUCT: return ftccl::ReduceOp::kProd;
    case c10d::ReduceOp::MIN: return ftccl::ReduceOp::kMin;
    case c10d::ReduceOp::MAX: return ftccl::ReduceOp::kMax;
    default:
      TORCH_CHECK(false, "ftccl: unsupported reduction (sum, avg, product, min and max are)");
  }
}

void CheckTensor(const at::Tensor& t) {
  TORCH_CHECK(t.device().is_cpu(), "ftccl: tensors must be on the CPU, got ", t.device());
  TORCH_CHECK(t.layout() == at::kStrided, "ftccl: tensors must be dense");
}

void CheckSingle(const std::vector<at::Tensor>& tensors) {
  TORCH_CHECK(tensors.size() == 1, "ftccl: one tensor per process, got ", tensors.size());
  CheckTensor(tensors[0]);
}

// A contiguous view of `t`, or a contiguous copy that CopyBack writes into `t`.
struct Dense {
  at::Tensor orig;
  at::Tensor dense;
  explicit Dense(const at::Tensor& t) : orig(t), dense(t.is_contiguous() ? t : t.contiguous()) {}
  void* data() const { return dense.data_ptr(); }
  void CopyBack() const {
    if (!dense.is_same(orig)) orig.copy_(dense);
  }
};

// A flat buffer of `n` tensors of the same shape and type, block i = tensors[i].
at::Tensor Flatten(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> flat;
  flat.reserve(tensors.size());
  for (const auto& t : tensors) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

void CheckSameShape(const std::vector<at::Tensor>& tensors, const at::Tensor& like, int size,
                    const char* what) {
  TORCH_CHECK(static_cast<int>(tensors.size()) == size, "ftccl: ", what, " needs ", size,
              " tensors (one per rank), got ", tensors.size());
  for (const auto& t : tensors) {
    CheckTensor(t);
    TORCH_CHECK(t.scalar_type() == like.scalar_type() && t.numel() == like.numel(), "ftccl: ",
                what, ": every tensor must have the type and size of the input");
  }
}

// Rank 0's bootstrap listener on an ephemeral port of `host`; returns the fd and "ip:port".
std::pair<int, std::string> ListenEphemeral(const std::string& host) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  TORCH_CHECK(inet_pton(AF_INET, host.c_str(), &addr.sin_addr) == 1,
              "ftccl: bootstrap host must be an IPv4 address, got '", host, "'");
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  TORCH_CHECK(fd >= 0, "ftccl: socket: ", std::strerror(errno));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, 1024) != 0) {
    const int err = errno;
    close(fd);
    TORCH_CHECK(false, "ftccl: listening on ", host, ": ", std::strerror(err));
  }
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return {fd, host + ":" + std::to_string(ntohs(addr.sin_port))};
}

const char kBootstrapKey[] = "ftccl/bootstrap";

int64_t MonoNowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::function<void(const std::function<void()>&)>& GilReleaser() {
  static std::function<void(const std::function<void()>&)> f;
  return f;
}

// Runs `fn` with the Python GIL released where the caller holds it (a group destroyed or shut
// down from Python): the group's thread may need the GIL to release a tensor.
void WithoutGil(const std::function<void()>& fn) {
  if (GilReleaser()) {
    GilReleaser()(fn);
  } else {
    fn();
  }
}

}  // namespace

void SetGilReleaser(std::function<void(const std::function<void()>&)> releaser) {
  GilReleaser() = std::move(releaser);
}

// A queued collective and the Work that reports it.
class WorkFtccl final : public c10d::Work {
 public:
  WorkFtccl(int rank, OpType type, std::vector<at::Tensor> outputs)
      : c10d::Work(rank, type),
        outputs_(std::move(outputs)),
        future_(c10::make_intrusive<c10::ivalue::Future>(
            c10::ListType::create(c10::TensorType::get()))) {}

  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  // The Future first, then the Work (as ProcessGroupGloo): once wait() returns, the Future's
  // value is there.
  void Complete(const ftccl::Status& st) {
    if (st.ok()) {
      future_->markCompleted(c10::IValue(outputs_));
      finish();
    } else {
      auto error = std::make_exception_ptr(std::runtime_error("ftccl: " + st.ToString()));
      future_->setError(error);
      finish(error);
    }
  }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

struct ProcessGroupFtccl::Item {
  Body body;
  c10::intrusive_ptr<WorkFtccl> work;
  std::vector<at::Tensor> inputs;  // kept alive until ftccl has returned
};

GroupConfig ConfigFromEnv() {
  GroupConfig c;
  if (const char* b = std::getenv("FTCCL_BOOTSTRAP"); b && *b) c.bootstrap = b;
  if (const char* m = std::getenv("MASTER_ADDR"); m && *m) c.bootstrap_host = m;
  const char* rails = std::getenv("FTCCL_RAILS");
  TORCH_CHECK(rails && *rails,
              "ftccl: FTCCL_RAILS is not set (this rank's rail addresses or interfaces, "
              "comma-separated)");
  std::stringstream ss(rails);
  for (std::string r; std::getline(ss, r, ',');) {
    if (!r.empty()) c.rails.push_back(r);
  }
  TORCH_CHECK(!c.rails.empty(), "ftccl: FTCCL_RAILS names no rail");
  TORCH_CHECK(!c.bootstrap.empty() || !c.bootstrap_host.empty(),
              "ftccl: set FTCCL_BOOTSTRAP (rank 0's ip:port) or MASTER_ADDR");
  return c;
}

ProcessGroupFtccl::ProcessGroupFtccl(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                     int size, std::chrono::milliseconds timeout,
                                     GroupConfig config)
    : c10d::ProcessGroup(rank, size), timeout_(timeout) {
  ftccl::CommOptions o;
  o.rank = rank;
  o.size = size;
  o.rails = config.rails;
  o.op_timeout = timeout;
  o.init_timeout = timeout;
  ftccl::Status env = ftccl::ApplyEnvOverrides(&o);
  TORCH_CHECK(env.ok(), "ftccl: ", env.ToString());
  int listen_fd = -1;
  if (!config.bootstrap.empty()) {
    o.bootstrap = config.bootstrap;
  } else if (rank == 0) {
    auto [fd, where] = ListenEphemeral(config.bootstrap_host);
    listen_fd = fd;
    o.bootstrap = where;
    o.bootstrap_listen_fd = fd;
    store->set(kBootstrapKey, std::vector<uint8_t>(where.begin(), where.end()));
  } else {
    std::vector<uint8_t> where = store->get(kBootstrapKey);
    o.bootstrap.assign(where.begin(), where.end());
  }
  auto comm = ftccl::Communicator::Create(std::move(o));
  if (listen_fd >= 0) close(listen_fd);  // Create dup()s it
  TORCH_CHECK(comm.ok(), "ftccl: joining the group failed: ", comm.status().ToString());
  comm_ = std::move(comm).value();
  num_rails_ = comm_->num_rails();
  thread_ = std::thread([this] { Loop(); });
  init();
}

ProcessGroupFtccl::~ProcessGroupFtccl() {
  WithoutGil([this] {
    bool busy;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (thread_.joinable()) stop_ = true;
      busy = running_ || !queue_.empty();
    }
    cv_.notify_all();
    // Whatever is still queued or running ends: Abort fails it at once (its Work gets the
    // error).
    if (busy && comm_) comm_->Abort("process group destroyed with collectives pending");
    if (thread_.joinable()) thread_.join();
    StopCompleters();
    comm_.reset();
  });
}

void ProcessGroupFtccl::Complete(std::function<void()> task) {
  std::lock_guard<std::mutex> lock(completion_mu_);
  completions_.push_back(std::move(task));
  // A completer blocked in a callback (waiting for another collective) must not hold up the
  // rest: with none idle, one more is started.
  if (idle_completers_ == 0) {
    completers_.emplace_back([this] { CompleterLoop(); });
  } else {
    completion_cv_.notify_one();
  }
}

void ProcessGroupFtccl::CompleterLoop() {
  std::unique_lock<std::mutex> lock(completion_mu_);
  for (;;) {
    if (!completions_.empty()) {
      std::function<void()> task = std::move(completions_.front());
      completions_.pop_front();
      lock.unlock();
      task();
      lock.lock();
      continue;
    }
    if (stop_completers_) return;
    ++idle_completers_;
    completion_cv_.wait(lock);
    --idle_completers_;
  }
}

void ProcessGroupFtccl::StopCompleters() {
  {
    std::lock_guard<std::mutex> lock(completion_mu_);
    stop_completers_ = true;
  }
  completion_cv_.notify_all();
  for (auto& t : completers_) t.join();  // each finishes the queue first
  completers_.clear();
}

void ProcessGroupFtccl::Shutdown() {
  WithoutGil([this] {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!thread_.joinable()) return;
      // What was issued runs to its end first (a shutdown is orderly, not an abort).
      idle_.wait(lock, [this] { return queue_.empty() && !running_; });
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    StopCompleters();
    comm_.reset();  // closes every connection in order
  });
}

int64_t ProcessGroupFtccl::BusySinceNs() const { return busy_since_ns_.load(); }

void ProcessGroupFtccl::Loop() {
  for (;;) {
    std::shared_ptr<Item> item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      item = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
    }
    ftccl::Status st;
    busy_since_ns_ = MonoNowNs();
    try {
      st = item->body();
    } catch (const std::exception& e) {
      // A tensor copy failed (out of memory) before or after ftccl's call: the peers' matching
      // collective must not wait out its deadline for this rank.
      st = ftccl::Status(ftccl::Code::kInternal, e.what());
      comm_->Abort(std::string("collective failed on this rank: ") + e.what());
    }
    busy_since_ns_ = 0;
    // The Future's callbacks run where it completes (Future::markCompleted runs them inline),
    // and a callback may issue another collective of this group and wait for it (DDP's
    // PowerSGD hook does): never on this thread, which that collective needs. The inputs are
    // released here; the outputs travel with the Work.
    item->inputs.clear();
    Complete([work = item->work, st] { work->Complete(st); });
    std::lock_guard<std::mutex> lock(mu_);
    running_ = false;
    idle_.notify_all();
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFtccl::Enqueue(OpType type, Body body,
                                                         std::vector<at::Tensor> outputs,
                                                         std::vector<at::Tensor> inputs) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    TORCH_CHECK(!stop_, "ftccl: the process group was shut down");
  }
  auto item = std::make_shared<Item>();
  item->body = std::move(body);
  item->work = c10::make_intrusive<WorkFtccl>(rank_, type, std::move(outputs));
  item->inputs = std::move(inputs);
  auto work = item->work;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(item));
  }
  cv_.notify_one();
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFtccl::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  CheckSingle(tensors);
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, "ftccl: bad root ", opts.rootRank);
  at::Tensor t = tensors[0];
  const auto dt = ToFtccl(t.scalar_type(), false);
  const int root = static_cast<int>(opts.rootRank);
  return Enqueue(
      OpType::BROADCAST,
      [this, t, dt, root] {
        Dense d(t);
        ftccl::Status st = comm_->Broadcast(d.data(), d.data(), t.numel(), dt, root, Deadline());
        if (st.ok()) d.CopyBack();
        return st;
      },
      tensors, {});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFtccl::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  CheckSingle(tensors);
  at::Tensor t = tensors[0];
  const auto dt = ToFtccl(t.scalar_type(), true);
  const auto op = ToFtccl(opts.reduceOp);
  return Enqueue(
      OpType::ALLREDUCE,
      [this, t, dt, op] {
        Dense d(t);
        ftccl::Status st = comm_->AllReduce(d.data(), d.data(), t.numel(), dt, op, Deadline());
        if (st.ok()) d.CopyBack();
        return st;
      },
      tensors, {});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFtccl::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "ftccl: allreduce_coalesced of no tensor");
  for (const auto& t : tensors) {
    CheckTensor(t);
    TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type(),
                "ftccl: allreduce_coalesced needs tensors of one type");
  }
  const auto dt = ToFtccl(tensors[0].scalar_type(), true);
  const auto op = ToFtccl(opts.reduceOp);
  std::vector<at::Tensor> ts = tensors;
  return Enqueue(
      OpType::ALLREDUCE_COALESCED,
      [this, ts, dt, op] {
        at::Tensor flat = Flatten(ts);
        ftccl::Status st =
            comm_->AllReduce(flat.data_ptr(), flat.data_ptr(), flat.numel(), dt, op, Deadline());
        if (!st.ok()) return st;
        int64_t off = 0;
        for (const auto& t : ts) {
          t.copy_(flat.narrow(0, off, t.numel()).view(t.sizes()));
          off += t.numel();
        }
        return st;
      },
      tensors, {});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFtccl::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  CheckSingle(tensors);
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, "ftccl: bad root ", opts.rootRank);
  at::Tensor t = tensors[0];
  const auto dt = ToFtccl(t.scalar_type(), true);
  const auto op = ToFtccl(opts.reduceOp);
  const int root = static_cast<int>(opts.rootRank);
  return Enqueue(
      OpType::REDUCE,
      [this, t, dt, op, root] {
        Dense d(t);
        ftccl::Status st = comm_->Reduce(d.data(), d.data(), t.numel(), dt, op, root, Deadline());
        if (st.ok() && rank_ == root) d.CopyBack();
        return st;
      },
      tensors, {});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFtccl::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  CheckSingle(inputs);
  TORCH_CHECK(outputs.size() == 1, "ftccl: one output list per process, got ", outputs.size());
  at::Tensor in = inputs[0];
  CheckSameShape(outputs[0], in, size_, "allgather");
  const auto dt = ToFtccl(in.scalar_type(), false);
  std::vector<at::Tensor> outs = outputs[0];
  return Enqueue(
      OpType::ALLGATHER,
      [this, in, outs, dt] {
        Dense d(in);
        at::Tensor flat = at::empty({in.numel() * size_}, in.options());
        ftccl::Status st = comm_->AllGather(d.data(), flat.data_ptr(), in.numel(), dt, Deadline());
        if (!st.ok()) return st;
        for (int i = 0; i < size_; ++i) {
          outs[i].copy_(flat.narrow(0, i * in.numel(), in.numel()).view(outs[i].sizes()));
        }
        return st;
      },
      outs, inputs);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFtccl::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions&) {
  CheckTensor(input);
  CheckTensor(output);
  TORCH_CHECK(output.scalar_type() == input.scalar_type() &&
                  output.numel() == input.numel() * size_,
              "ftccl: _allgather_base: the output must hold size x the input");
  const auto dt = ToFtccl(input.scalar_type(), false);
  at::Tensor in = input, out = output;
  return Enqueue(
      OpType::_ALLGATHER_BASE,
      [this, in, out, dt] {
        Dense di(in), dout(out);
        ftccl::Status st = comm_->AllGather(di.data(), dout.data(), in.numel(), dt, Deadline());
        if (st.ok()) dout.CopyBack();
        return st;
      },
      {output}, {input});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFtccl::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  CheckSingle(outputs);
  TORCH_CHECK(inputs.size() == 1, "ftccl: one input list per process, got ", inputs.size());
  at::Tensor out = outputs[0];
  CheckSameShape(inputs[0], out, size_, "reduce_scatter");
  const auto dt = ToFtccl(out.scalar_type(), true);
  const auto op = ToFtccl(opts.reduceOp);
  std::vector<at::Tensor> ins = inputs[0];
  return Enqueue(
      OpType::REDUCE_SCATTER,
      [this, ins, out, dt, op] {
        at::Tensor flat = Flatten(ins);
        Dense d(out);
        ftccl::Status st =
            comm_->ReduceScatter(flat.data_ptr(), d.data(), out.numel(), dt, op, Deadline());
        if (st.ok()) d.CopyBack();
        return st;
      },
      outputs, ins);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFtccl::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  CheckTensor(input);
  CheckTensor(output);
  TORCH_CHECK(output.scalar_type() == input.scalar_type() &&
                  input.numel() == output.numel() * size_,
              "ftccl: _reduce_scatter_base: the input must hold size x the output");
  const auto dt = ToFtccl(input.scalar_type(), true);
  const auto op = ToFtccl(opts.reduceOp);
  at::Tensor in = input, out = output;
  return Enqueue(
      OpType::_REDUCE_SCATTER_BASE,
      [this, in, out, dt, op] {
        Dense di(in), dout(out);
        ftccl::Status st =
            comm_->ReduceScatter(di.data(), dout.data(), out.numel(), dt, op, Deadline());
        if (st.ok()) dout.CopyBack();
        return st;
      },
      {output}, {input});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFtccl::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
    std::vector<int64_t>& input_splits, const c10d::AllToAllOptions&) {
  CheckTensor(input);
  CheckTensor(output);
  TORCH_CHECK(output_splits.empty() && input_splits.empty(),
              "ftccl: alltoall_base supports equal splits only (no split sizes)");
  TORCH_CHECK(input.numel() % size_ == 0 && output.numel() == input.numel() &&
                  output.scalar_type() == input.scalar_type(),
              "ftccl: alltoall_base: input and output must be equal and divide by the size");
  const auto dt = ToFtccl(input.scalar_type(), false);
  at::Tensor in = input, out = output;
  return Enqueue(
      OpType::ALLTOALL_BASE,
      [this, in, out, dt] {
        Dense di(in), dout(out);
        ftccl::Status st =
            comm_->AllToAll(di.data(), dout.data(), in.numel() / size_, dt, Deadline());
        if (st.ok()) dout.CopyBack();
        return st;
      },
      {output}, {input});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFtccl::alltoall(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllToAllOptions&) {
  TORCH_CHECK(!inputs.empty(), "ftccl: alltoall of no tensor");
  CheckSameShape(inputs, inputs[0], size_, "alltoall");
  CheckSameShape(outputs, inputs[0], size_, "alltoall");
  const auto dt = ToFtccl(inputs[0].scalar_type(), false);
  std::vector<at::Tensor> ins = inputs, outs = outputs;
  return Enqueue(
      OpType::ALLTOALL,
      [this, ins, outs, dt] {
        at::Tensor flat_in = Flatten(ins);
        at::Tensor flat_out = at::empty_like(flat_in);
        const size_t block = ins[0].numel();
        ftccl::Status st =
            comm_->AllToAll(flat_in.data_ptr(), flat_out.data_ptr(), block, dt, Deadline());
        if (!st.ok()) return st;
        for (int i = 0; i < size_; ++i) {
          outs[i].copy_(flat_out.narrow(0, i * block, block).view(outs[i].sizes()));
        }
        return st;
      },
      outs, ins);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFtccl::barrier(const c10d::BarrierOptions&) {
  return Enqueue(OpType::BARRIER, [this] { return comm_->Barrier(Deadline()); }, {}, {});
}

// After Shutdown the communicator is gone: nothing to drain, no counters.
std::vector<ftccl::Event> ProcessGroupFtccl::DrainEvents() {
  return comm_ ? comm_->DrainEvents() : std::vector<ftccl::Event>{};
}
ftccl::CommStats ProcessGroupFtccl::Stats() const {
  TORCH_CHECK(comm_, "ftccl: the process group was shut down");
  return comm_->Stats();
}
std::vector<std::pair<std::string, std::string>> ProcessGroupFtccl::Knobs() const {
  TORCH_CHECK(comm_, "ftccl: the process group was shut down");
  return ftccl::EffectiveKnobs(comm_->options());
}
int ProcessGroupFtccl::NumRails() const { return num_rails_; }

}  // namespace faultline::torch_ftccl
