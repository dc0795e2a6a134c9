// The NCCL adapter: one rank per process on one CUDA device (LOCAL_RANK, else the rank, modulo
// the visible devices). The unique id is exchanged through the group's store directory: rank 0
// writes <store_dir>/nccl-unique-id atomically, the others poll for it until the init deadline
// (the directory must be private to this group, as for gloo). The rails are told to NCCL by
// interface: NCCL_SOCKET_IFNAME and, where every rail has an RDMA port, NCCL_IB_HCA
// (nccl_env.h), unless the job's environment sets them; the resiliency knobs in force are
// recorded (Knobs).
//
// Deadlines: the communicator is non-blocking (ncclConfig_t.blocking = 0), so init, every
// collective and the final barrier are polled (ncclCommGetAsyncError, cudaStreamQuery) until
// done or their deadline; on the deadline or an asynchronous error the communicator is aborted
// (ncclCommAbort) and the error is sticky. The worker's buffers are host memory: Run stages them
// through pinned buffers (a pageable device-to-host copy would block the thread without a
// bound). Finish also finalizes and destroys the communicator; Abort aborts it. NCCL emits no
// events and keeps no counters this adapter reads. The bootstrap address and its listener are
// not used.
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "workload/adapters/ccl_adapter.h"
#include "workload/adapters/nccl_env.h"

namespace faultline::workload::adapters {
namespace {

using Clock = std::chrono::steady_clock;
using workload::Coll;
using workload::DType;
using workload::RedOp;

constexpr char kUniqueIdFile[] = "nccl-unique-id";

std::string CudaError(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

Status FromCuda(const std::string& what, cudaError_t e) {
  if (e == cudaSuccess) return Status::Ok();
  return Unavailable("nccl: " + what + ": " + CudaError(e));
}

std::string NcclError(ncclResult_t r, ncclComm_t comm) {
  std::string m = ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && last[0] != '\0') m += " (" + std::string(last) + ")";
  return m;
}

ncclDataType_t ToNccl(DType t) {
  switch (t) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kF64:
      return ncclFloat64;
    case DType::kF16:
      return ncclFloat16;
    case DType::kBF16:
      return ncclBfloat16;
    case DType::kI32:
      return ncclInt32;
    case DType::kI64:
      return ncclInt64;
    case DType::kU8:
      break;
  }
  return ncclUint8;
}

ncclRedOp_t ToNccl(RedOp op) {
  switch (op) {
    case RedOp::kSum:
      return ncclSum;
    case RedOp::kProd:
      return ncclProd;
    case RedOp::kMin:
      return ncclMin;
    case RedOp::kMax:
      return ncclMax;
    case RedOp::kAvg:
      break;
  }
  return ncclAvg;
}

// Bytes of the send and recv buffers of one call (see workload::SizeLayout::count).
void BufferBytes(const workload::OpArgs& a, int ranks, size_t* send, size_t* recv) {
  const size_t one = a.count * workload::DTypeSize(a.dtype);
  const size_t all = one * static_cast<size_t>(ranks);
  switch (a.coll) {
    case Coll::kAllGather:
      *send = one;
      *recv = all;
      return;
    case Coll::kReduceScatter:
      *send = all;
      *recv = one;
      return;
    case Coll::kAllToAll:
      *send = all;
      *recv = all;
      return;
    case Coll::kAllReduce:
    case Coll::kBroadcast:
      break;
  }
  *send = one;
  *recv = one;
}

// The polling interval of a wait: short at first (a small collective ends in microseconds),
// then up to 1 ms.
class Backoff final {
 public:
  void Pause() {
    if (spins_ < 200) {
      ++spins_;
      return;
    }
    std::this_thread::sleep_for(sleep_);
    if (sleep_ < std::chrono::microseconds(1000)) sleep_ *= 2;
  }

 private:
  int spins_ = 0;
  std::chrono::microseconds sleep_{10};
};

// Reads the unique id rank 0 wrote; false while it is not (completely) there.
bool ReadUniqueId(const std::string& path, ncclUniqueId* id) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  const size_t n = std::fread(id, 1, sizeof(*id), f);
  std::fclose(f);
  return n == sizeof(*id);
}

// Writes the unique id to `path` atomically (a temporary file renamed over it).
Status WriteUniqueId(const std::string& path, const ncclUniqueId& id) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return ErrnoStatus("nccl: create " + tmp, errno);
  const bool written = std::fwrite(&id, 1, sizeof(id), f) == sizeof(id);
  const int write_errno = errno;
  if (std::fclose(f) != 0 || !written) {
    const int err = written ? errno : write_errno;
    std::remove(tmp.c_str());
    return ErrnoStatus("nccl: write " + tmp, err == 0 ? EIO : err);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return ErrnoStatus("nccl: rename " + tmp, err);
  }
  return Status::Ok();
}

// A device or pinned host buffer that only grows; freed on destruction.
class DeviceBuffer final {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { Free(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  Status Reserve(size_t bytes, bool pinned_host) {
    if (bytes <= bytes_ && data_ != nullptr) return Status::Ok();
    Free();
    const size_t want = bytes == 0 ? 1 : bytes;
    const cudaError_t e = pinned_host ? cudaMallocHost(&data_, want) : cudaMalloc(&data_, want);
    if (e != cudaSuccess) {
      data_ = nullptr;
      return FromCuda(std::string(pinned_host ? "cudaMallocHost " : "cudaMalloc ") +
                          std::to_string(want) + " bytes",
                      e);
    }
    pinned_ = pinned_host;
    bytes_ = want;
    return Status::Ok();
  }
  void* data() const { return data_; }
  char* bytes_at(size_t offset) const { return static_cast<char*>(data_) + offset; }

 private:
  void Free() noexcept {
    if (data_ == nullptr) return;
    if (pinned_) {
      cudaFreeHost(data_);
    } else {
      cudaFree(data_);
    }
    data_ = nullptr;
    bytes_ = 0;
  }

  void* data_ = nullptr;
  size_t bytes_ = 0;
  bool pinned_ = false;
};

class NcclAdapter final : public CclAdapter {
 public:
  NcclAdapter() = default;
  ~NcclAdapter() override {
    // Reverse order of creation: the communicator (aborted: never waits for peers), the
    // stream (released once its work has ended), then the buffers (members).
    AbortComm();
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  NcclAdapter(const NcclAdapter&) = delete;
  NcclAdapter& operator=(const NcclAdapter&) = delete;

  std::string Name() const override { return "nccl"; }

  Status Init(const CclInit& init) override {
    const Clock::time_point deadline = Clock::now() + init.init_timeout;
    if (init.store_dir.empty()) return InvalidArgument("nccl: needs a store directory");
    if (!init.fault_hook.empty()) return InvalidArgument("nccl: serves no fault hook");
    if (!init.allreduce_algorithm.empty()) {
      return InvalidArgument("nccl: no choice of allreduce algorithm here (NCCL_ALGO is NCCL's)");
    }
    if (init.size < 1 || init.rank < 0 || init.rank >= init.size) {
      return InvalidArgument("nccl: bad rank " + std::to_string(init.rank) + " of " +
                             std::to_string(init.size));
    }
    size_ = init.size;

    int devices = 0;
    const cudaError_t ce = cudaGetDeviceCount(&devices);
    if (ce != cudaSuccess || devices < 1) {
      return Unavailable("nccl: no CUDA device visible (cudaGetDeviceCount: " +
                         (ce != cudaSuccess ? CudaError(ce) : std::string("0 devices")) + ")");
    }
    int local_rank = init.rank;
    if (const char* env = std::getenv("LOCAL_RANK"); env != nullptr && env[0] != '\0') {
      char* end = nullptr;
      const long v = std::strtol(env, &end, 10);
      if (*end != '\0' || v < 0) {
        return InvalidArgument("nccl: LOCAL_RANK='" + std::string(env) + "' is not a rank");
      }
      local_rank = static_cast<int>(v);
    }
    const int device = local_rank % devices;
    FL_RETURN_IF_ERROR(FromCuda("cudaSetDevice " + std::to_string(device), cudaSetDevice(device)));
    FL_RETURN_IF_ERROR(
        FromCuda("cudaStreamCreate", cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)));

    // Point NCCL at this rank's rails (unless the job's environment already does) and record
    // what is in force, before NCCL reads its environment.
    Result<std::vector<RailInterface>> rails = ResolveRails(init.rails);
    if (!rails.ok()) return Unavailable("nccl: " + rails.status().message());
    const std::vector<std::pair<std::string, std::string>> ours = NcclRailEnv(*rails);
    knobs_ = ApplyNcclEnv(ours);
    rails_told_ = !ours.empty();
    for (const auto& [name, value] : ours) {
      for (const auto& [k, v] : knobs_) rails_told_ &= k != name || v == value;
    }

    ncclUniqueId id;
    const std::string path = init.store_dir + "/" + kUniqueIdFile;
    if (init.rank == 0) {
      const ncclResult_t r = ncclGetUniqueId(&id);
      if (r != ncclSuccess) {
        return Unavailable("nccl: ncclGetUniqueId: " + NcclError(r, nullptr));
      }
      FL_RETURN_IF_ERROR(WriteUniqueId(path, id));
    } else {
      while (!ReadUniqueId(path, &id)) {
        if (Clock::now() >= deadline) {
          return Unavailable("nccl: timed out after " + std::to_string(init.init_timeout.count()) +
                             " ms waiting for " + path + " from rank 0");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }

    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const ncclResult_t r = ncclCommInitRankConfig(&comm_, init.size, id, init.rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
      Status st = Unavailable("nccl: ncclCommInitRankConfig: " + NcclError(r, comm_));
      AbortComm();
      return st;
    }
    return WaitComm("ncclCommInitRankConfig", deadline, init.init_timeout);
  }

  Status Prepare(const workload::OpArgs& args) override {
    if (!error_.ok()) return error_;
    if (comm_ == nullptr) return Internal("nccl: Prepare before Init");
    return Reserve(args);
  }

  Status Run(const workload::OpArgs& args, std::chrono::milliseconds timeout) override {
    if (!error_.ok()) return error_;
    if (comm_ == nullptr) return Internal("nccl: Run before Init");
    const Clock::time_point deadline = Clock::now() + timeout;
    FL_RETURN_IF_ERROR(Reserve(args));  // a no-op for the prepared arguments
    size_t send_bytes = 0, recv_bytes = 0;
    BufferBytes(args, size_, &send_bytes, &recv_bytes);

    std::memcpy(send_host_.data(), args.send, send_bytes);
    cudaError_t ce = cudaMemcpyAsync(send_dev_.data(), send_host_.data(), send_bytes,
                                     cudaMemcpyHostToDevice, stream_);
    if (ce != cudaSuccess) return Sticky(FromCuda("copy to the device", ce));
    FL_RETURN_IF_ERROR(Launch(args, deadline, timeout));
    ce = cudaMemcpyAsync(recv_host_.data(), recv_dev_.data(), recv_bytes, cudaMemcpyDeviceToHost,
                         stream_);
    if (ce != cudaSuccess) return Sticky(FromCuda("copy to the host", ce));
    FL_RETURN_IF_ERROR(
        WaitStream(std::string("nccl ") + workload::CollName(args.coll), deadline, timeout));
    std::memcpy(args.recv, recv_host_.data(), recv_bytes);
    return Status::Ok();
  }

  Status Barrier(std::chrono::milliseconds timeout) override {
    if (!error_.ok()) return error_;
    if (comm_ == nullptr) return Internal("nccl: Barrier before Init");
    const Clock::time_point deadline = Clock::now() + timeout;
    // A one-element allreduce on the device.
    FL_RETURN_IF_ERROR(barrier_.Reserve(sizeof(int32_t), /*pinned_host=*/false));
    const cudaError_t ce = cudaMemsetAsync(barrier_.data(), 0, sizeof(int32_t), stream_);
    if (ce != cudaSuccess) return Sticky(FromCuda("cudaMemsetAsync", ce));
    FL_RETURN_IF_ERROR(Issue("barrier", deadline, timeout, [&] {
      return ncclAllReduce(barrier_.data(), barrier_.data(), 1, ncclInt32, ncclSum, comm_, stream_);
    }));
    return WaitStream("barrier", deadline, timeout);
  }

  Status Finish(std::chrono::milliseconds timeout) override {
    const Clock::time_point deadline = Clock::now() + timeout;
    // The barrier, then a bounded finalize.
    FL_RETURN_IF_ERROR(Barrier(timeout));
    ncclResult_t r = ncclCommFinalize(comm_);
    if (r != ncclSuccess && r != ncclInProgress) {
      return Sticky(Unavailable("nccl: ncclCommFinalize: " + NcclError(r, comm_)));
    }
    FL_RETURN_IF_ERROR(WaitComm("ncclCommFinalize", deadline, timeout));
    r = ncclCommDestroy(comm_);
    comm_ = nullptr;
    if (r != ncclSuccess)
      return Sticky(Unavailable("nccl: ncclCommDestroy: " + std::string(ncclGetErrorString(r))));
    error_ = Internal("nccl: the communicator was destroyed by Finish");
    return Status::Ok();
  }

  void Abort(const std::string& reason) override {
    if (error_.ok()) error_ = Unavailable("nccl: aborted: " + reason);
    AbortComm();
  }

  bool EmitsEvents() const override { return false; }
  // Every rail where NCCL_SOCKET_IFNAME / NCCL_IB_HCA are the rails' (ApplyNcclEnv); not
  // known where the job's environment chose other interfaces.
  std::vector<int> RailsUsed(int rails) const override {
    if (!rails_told_) return {};
    return CclAdapter::RailsUsed(rails);
  }
  std::vector<std::pair<std::string, std::string>> Knobs() const override { return knobs_; }
  // The linked library's ncclGetVersion: MAJOR * 10000 + MINOR * 100 + PATCH since 2.9,
  // MAJOR * 1000 + MINOR * 100 + PATCH before. Needs no device.
  std::string Version() const override {
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess || v <= 0) return "";
    const bool wide = v >= 10000;
    const int major = wide ? v / 10000 : v / 1000;
    const int minor = wide ? v % 10000 / 100 : v % 1000 / 100;
    return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(v % 100);
  }

 private:
  // Grows the staging and device buffers to fit `args`.
  Status Reserve(const workload::OpArgs& args) {
    size_t send_bytes = 0, recv_bytes = 0;
    BufferBytes(args, size_, &send_bytes, &recv_bytes);
    FL_RETURN_IF_ERROR(send_dev_.Reserve(send_bytes, /*pinned_host=*/false));
    FL_RETURN_IF_ERROR(recv_dev_.Reserve(recv_bytes, /*pinned_host=*/false));
    FL_RETURN_IF_ERROR(send_host_.Reserve(send_bytes, /*pinned_host=*/true));
    return recv_host_.Reserve(recv_bytes, /*pinned_host=*/true);
  }

  // Enqueues the collective of `args` on the stream.
  Status Launch(const workload::OpArgs& a, Clock::time_point deadline,
                std::chrono::milliseconds timeout) {
    const ncclDataType_t t = ToNccl(a.dtype);
    void* send = send_dev_.data();
    void* recv = recv_dev_.data();
    const std::string what = std::string("nccl ") + workload::CollName(a.coll);
    switch (a.coll) {
      case Coll::kAllReduce:
        return Issue(what, deadline, timeout, [&] {
          return ncclAllReduce(send, recv, a.count, t, ToNccl(a.redop), comm_, stream_);
        });
      case Coll::kAllGather:
        return Issue(what, deadline, timeout,
                     [&] { return ncclAllGather(send, recv, a.count, t, comm_, stream_); });
      case Coll::kReduceScatter:
        return Issue(what, deadline, timeout, [&] {
          return ncclReduceScatter(send, recv, a.count, t, ToNccl(a.redop), comm_, stream_);
        });
      case Coll::kBroadcast:
        return Issue(what, deadline, timeout,
                     [&] { return ncclBroadcast(send, recv, a.count, t, a.root, comm_, stream_); });
      case Coll::kAllToAll:
        break;
    }
    // Alltoall: block p of the send buffer goes to rank p, block p of recv comes from it.
    const size_t block = a.count * workload::DTypeSize(a.dtype);
    return Issue(what, deadline, timeout, [&] {
      ncclResult_t r = ncclGroupStart();
      for (int p = 0; p < size_ && r == ncclSuccess; ++p) {
        r = ncclSend(send_dev_.bytes_at(block * p), a.count, t, p, comm_, stream_);
        if (r == ncclSuccess) {
          r = ncclRecv(recv_dev_.bytes_at(block * p), a.count, t, p, comm_, stream_);
        }
      }
      const ncclResult_t end = ncclGroupEnd();
      return r != ncclSuccess ? r : end;
    });
  }

  // Calls an enqueueing NCCL function; with a non-blocking communicator it may return
  // ncclInProgress, then the call is complete once the communicator is no longer in progress.
  template <typename F>
  Status Issue(const std::string& what, Clock::time_point deadline,
               std::chrono::milliseconds timeout, F&& call) {
    const ncclResult_t r = call();
    if (r == ncclSuccess) return Status::Ok();
    if (r != ncclInProgress) {
      return Sticky(Unavailable("nccl: " + what + ": " + NcclError(r, comm_)));
    }
    return WaitComm(what, deadline, timeout);
  }

  // Polls the communicator until it is no longer in progress; aborts it on an error or at the
  // deadline.
  Status WaitComm(const std::string& what, Clock::time_point deadline,
                  std::chrono::milliseconds timeout) {
    Backoff backoff;
    for (;;) {
      ncclResult_t state = ncclSuccess;
      const ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
      if (r != ncclSuccess) state = r;
      if (state == ncclSuccess) return Status::Ok();
      if (state != ncclInProgress) {
        return Sticky(Unavailable("nccl: " + what + ": " + NcclError(state, comm_)));
      }
      if (Clock::now() >= deadline) return TimedOut(what, timeout);
      backoff.Pause();
    }
  }

  // Polls the stream until its work is done; aborts the communicator on an asynchronous NCCL
  // error or at the deadline.
  Status WaitStream(const std::string& what, Clock::time_point deadline,
                    std::chrono::milliseconds timeout) {
    Backoff backoff;
    for (;;) {
      const cudaError_t ce = cudaStreamQuery(stream_);
      if (ce == cudaSuccess) return Status::Ok();
      if (ce != cudaErrorNotReady) return Sticky(FromCuda(what + ": cudaStreamQuery", ce));
      ncclResult_t state = ncclSuccess;
      const ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
      if (r != ncclSuccess) state = r;
      if (state != ncclSuccess && state != ncclInProgress) {
        return Sticky(Unavailable("nccl: " + what + ": " + NcclError(state, comm_)));
      }
      if (Clock::now() >= deadline) return TimedOut(what, timeout);
      backoff.Pause();
    }
  }

  Status TimedOut(const std::string& what, std::chrono::milliseconds timeout) {
    return Sticky(Unavailable("nccl: " + what + " timed out after " +
                              std::to_string(timeout.count()) + " ms (communicator aborted)"));
  }

  // Records the first error, aborts the communicator and returns the error.
  Status Sticky(Status st) {
    if (error_.ok()) error_ = st;
    AbortComm();
    return st;
  }

  void AbortComm() noexcept {
    if (comm_ == nullptr) return;
    ncclCommAbort(comm_);
    comm_ = nullptr;
  }

  int size_ = 0;
  Status error_;  // sticky: the first failure, returned by every later call
  DeviceBuffer send_dev_;
  DeviceBuffer recv_dev_;
  DeviceBuffer send_host_;  // pinned staging of the worker's buffers
  DeviceBuffer recv_host_;
  DeviceBuffer barrier_;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
  std::vector<std::pair<std::string, std::string>> knobs_;  // ApplyNcclEnv's, at Init
  bool rails_told_ = false;  // NCCL's interfaces are the rails' (NcclRailEnv in force)
};

}  // namespace

std::unique_ptr<CclAdapter> NewNcclAdapter() { return std::make_unique<NcclAdapter>(); }

}  // namespace faultline::workload::adapters
