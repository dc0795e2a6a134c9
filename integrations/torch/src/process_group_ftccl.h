// ProcessGroupFtccl: ftccl as a torch.distributed (c10d) backend, for PyTorch 1.13's
// ProcessGroup interface (torch/csrc/distributed/c10d/ProcessGroup.hpp).
//
// One ftccl::Communicator per process group. Collectives are queued in call order and run, one
// at a time, on the group's own thread (ftccl runs a communicator's collectives in order anyway);
// the caller gets a Work at once. A Work completes when ftccl returns: its Future (getFuture(),
// which DDP's reducer waits on) then holds the output tensors, or the error; the Future is
// completed first, then the Work, on the group's completion threads rather than its collective
// thread, and a completion thread blocked in a callback gets another beside it: a Future
// callback may issue and wait for another collective of the group (DDP's PowerSGD hook does). The error carries
// ftccl's message; after one, the communicator's error is sticky (every later collective fails
// with it at once), as for any ftccl rank.
//
// Tensors: CPU and dense. A non-contiguous tensor is worked on through a contiguous copy. Element
// types: float32/64, float16, bfloat16, int32/64, uint8; bool and int8 only where nothing is
// reduced (broadcast, allgather, alltoall). Reductions: sum, avg, product, min, max.
//
// Buffer lifetime: the Work keeps its tensors alive until ftccl has returned, which is the point
// after which ftccl touches them no more (ftccl's buffer-lifetime guarantee).
//
// Thread-safety: the ProcessGroup methods may be called from any thread; DrainEvents too.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ftccl/communicator.h"

namespace faultline::torch_ftccl {

// How a process group reaches its peers. From the environment by FromEnv; the knobs
// (FTCCL_CHUNK_BYTES, FTCCL_FAULT_HOOK, ...) are applied to it by ftccl::ApplyEnvOverrides.
struct GroupConfig {
  std::string bootstrap;           // rank 0's "ip:port"; empty: exchanged through the store
  std::string bootstrap_host;      // where rank 0 listens when `bootstrap` is empty
  std::vector<std::string> rails;  // this rank's rail addresses or interface names
};

class ProcessGroupFtccl final : public c10d::ProcessGroup {
 public:
  // Joins the group: rank 0 listens (on `config.bootstrap`, or on an ephemeral port of
  // `config.bootstrap_host` that it publishes in `store`), the others connect. `timeout` is
  // every collective's deadline and bounds joining. Throws c10::Error with ftccl's message when
  // the group cannot be formed.
  ProcessGroupFtccl(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                    std::chrono::milliseconds timeout, GroupConfig config);
  ~ProcessGroupFtccl() override;

  const std::string getBackendName() const override { return "ftccl"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // The communicator's events since the last call (path_down, resumed, ...), oldest first.
  std::vector<ftccl::Event> DrainEvents();
  ftccl::CommStats Stats() const;
  // name -> value of every ftccl knob in force.
  std::vector<std::pair<std::string, std::string>> Knobs() const;
  int NumRails() const;
  // Orderly end: waits for the collectives already issued, then closes the communicator.
  // Later collectives throw. The destructor does the same but aborts what is still pending.
  void Shutdown();
  // CLOCK_MONOTONIC ns at which the collective now running started; 0 when none runs.
  int64_t BusySinceNs() const;

 private:
  // One queued collective: runs on the group's thread, returns ftccl's status.
  using Body = std::function<ftccl::Status()>;
  // Queues `body`; the Work completes with `outputs` (or the error) when it has run.
  // `inputs` stay referenced until then.
  c10::intrusive_ptr<c10d::Work> Enqueue(c10d::OpType type, Body body,
                                         std::vector<at::Tensor> outputs,
                                         std::vector<at::Tensor> inputs);
  void Loop();
  // Runs `task` (a Work's completion) on a completion thread.
  void Complete(std::function<void()> task);
  void CompleterLoop();
  void StopCompleters();  // after the collective thread: finishes what is queued, joins
  ftccl::Millis Deadline() const { return timeout_; }

  std::unique_ptr<ftccl::Communicator> comm_;
  const ftccl::Millis timeout_;
  int num_rails_ = 0;
  std::atomic<int64_t> busy_since_ns_{0};

  struct Item;
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_;  // the queue ran empty
  std::deque<std::shared_ptr<Item>> queue_;
  bool stop_ = false;
  bool running_ = false;  // the thread is inside a collective
  std::thread thread_;

  std::mutex completion_mu_;
  std::condition_variable completion_cv_;
  std::deque<std::function<void()>> completions_;
  int idle_completers_ = 0;
  bool stop_completers_ = false;
  std::vector<std::thread> completers_;
};

// How the groups release the Python GIL around their blocking teardown (Shutdown, the
// destructor) when the calling thread holds it: set once by the Python module; unset, they
// block as they are.
void SetGilReleaser(std::function<void(const std::function<void()>&)> releaser);

// GroupConfig from FTCCL_BOOTSTRAP, FTCCL_RAILS (comma-separated) and MASTER_ADDR.
// Throws c10::Error naming what is missing.
GroupConfig ConfigFromEnv();

}  // namespace faultline::torch_ftccl
