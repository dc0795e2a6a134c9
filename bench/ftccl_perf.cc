// ftccl-perf: collective throughput of ftccl over loopback TCP, nccl-tests style.
//
// Rank k gets rail r at 127.0.(r+1).(k+1), so every rail is its own set of TCP connections.
// Rank 0 bootstraps on the parent's already listening socket (CommOptions::bootstrap_listen_fd),
// so no rank can connect before rank 0 listens. Every knob can be overridden by its FTCCL_*
// environment variable; the effective values are printed in the header and the JSON.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

#include "ftccl/ftccl.h"
#include "perf_common.h"

namespace faultline::bench {
namespace {

ftccl::DataType ToFtccl(DType t) {
  switch (t) {
    case DType::kF32:
      return ftccl::DataType::kF32;
    case DType::kF64:
      return ftccl::DataType::kF64;
    case DType::kF16:
      return ftccl::DataType::kF16;
    case DType::kBF16:
      return ftccl::DataType::kBF16;
    case DType::kI32:
      return ftccl::DataType::kI32;
    case DType::kI64:
      return ftccl::DataType::kI64;
    case DType::kU8:
      break;
  }
  return ftccl::DataType::kU8;
}

ftccl::ReduceOp ToFtccl(RedOp op) {
  switch (op) {
    case RedOp::kSum:
      return ftccl::ReduceOp::kSum;
    case RedOp::kProd:
      return ftccl::ReduceOp::kProd;
    case RedOp::kMin:
      return ftccl::ReduceOp::kMin;
    case RedOp::kMax:
      return ftccl::ReduceOp::kMax;
    case RedOp::kAvg:
      break;
  }
  return ftccl::ReduceOp::kAvg;
}

Status FromFtccl(const ftccl::Status& st) {
  if (st.ok()) return Status::Ok();
  return Status::Error(st.ToString());
}

// The options every rank starts from; `rank`, addresses and the listener are filled per rank.
ftccl::CommOptions BaseOptions(const PerfOptions& o) {
  ftccl::CommOptions c;
  c.size = o.ranks;
  c.op_timeout = ftccl::Millis(o.timeout_s * 1000LL);
  return c;
}

class FtcclCcl final : public PerfCcl {
 public:
  explicit FtcclCcl(std::unique_ptr<ftccl::Communicator> comm) : comm_(std::move(comm)) {}

  Status Run(const OpArgs& a) override {
    const ftccl::DataType dt = ToFtccl(a.dtype);
    switch (a.coll) {
      case Coll::kAllReduce:
        return FromFtccl(comm_->AllReduce(a.send, a.recv, a.count, dt, ToFtccl(a.redop)));
      case Coll::kAllGather:
        return FromFtccl(comm_->AllGather(a.send, a.recv, a.count, dt));
      case Coll::kReduceScatter:
        return FromFtccl(comm_->ReduceScatter(a.send, a.recv, a.count, dt, ToFtccl(a.redop)));
      case Coll::kBroadcast:
        return FromFtccl(comm_->Broadcast(a.send, a.recv, a.count, dt, a.root));
      case Coll::kAllToAll:
        return FromFtccl(comm_->AllToAll(a.send, a.recv, a.count, dt));
    }
    return Status::Error("unknown collective");
  }

  Status Barrier() override { return FromFtccl(comm_->Barrier()); }

 private:
  std::unique_ptr<ftccl::Communicator> comm_;
};

Status CreateFtccl(const RankEnv& env, std::unique_ptr<PerfCcl>* out) {
  ftccl::CommOptions c = BaseOptions(*env.options);
  c.rank = env.rank;
  c.bootstrap = env.bootstrap;
  c.bootstrap_listen_fd = env.bootstrap_listen_fd;
  c.rails = env.rail_addrs;
  ftccl::Status st = ftccl::ApplyEnvOverrides(&c);
  if (!st.ok()) return Status::Error("FTCCL_* environment: " + st.ToString());
  auto comm = ftccl::Communicator::Create(std::move(c));
  if (!comm.ok()) return FromFtccl(comm.status());
  *out = std::make_unique<FtcclCcl>(std::move(comm).value());
  return Status::Ok();
}

}  // namespace
}  // namespace faultline::bench

int main(int argc, char** argv) {
  using namespace faultline::bench;
  PerfBackend backend;
  backend.name = "ftccl";
  const char* transport = std::getenv("FTCCL_TRANSPORT");
  backend.notes = {std::string("ftccl: ") + (transport ? transport : "tcp") +
                   " transport, every rail carries its own connections to every peer"};
  backend.validate = [](const PerfOptions& o) {
    ftccl::CommOptions c = BaseOptions(o);
    ftccl::Status st = ftccl::ApplyEnvOverrides(&c);
    if (!st.ok()) return Status::Error("FTCCL_* environment: " + st.ToString());
    return Status::Ok();
  };
  backend.knobs = [](const PerfOptions& o) {
    ftccl::CommOptions c = BaseOptions(o);
    if (!ftccl::ApplyEnvOverrides(&c).ok())
      return std::vector<std::pair<std::string, std::string>>{};
    return ftccl::EffectiveKnobs(c);
  };
  backend.create = &CreateFtccl;
  return PerfMain(argc, argv, backend);
}
