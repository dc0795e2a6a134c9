// The ftccl adapter: one ftccl::Communicator over every rail given. Every collective carries
// its own deadline; after an error the communicator is sticky and later calls fail fast.
// ftccl reports what its data path did about faults (path down, migrated, resumed, path up,
// failback, abort); DrainEvents turns them into the runner's CclEvent records.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ftccl/communicator.h"
#include "runner/ccl_adapter.h"

namespace faultline::runner {
namespace {

using workload::Coll;

// The library's error as a runner Status; its own code name stays in the message.
Status FromFtccl(const ftccl::Status& st) {
  if (st.ok()) return Status::Ok();
  if (st.code() == ftccl::Code::kInvalidArgument) return InvalidArgument(st.ToString());
  if (st.code() == ftccl::Code::kInternal) return Internal(st.ToString());
  return Unavailable(st.ToString());
}

class FtcclAdapter final : public CclAdapter {
 public:
  std::string Name() const override { return "ftccl"; }

  Status Init(const CclInit& init) override {
    ftccl::CommOptions o;
    o.rank = init.rank;
    o.size = init.size;
    o.bootstrap = init.bootstrap;
    o.rails = init.rails;
    o.init_timeout = ftccl::Millis(init.init_timeout.count());
    o.op_timeout = ftccl::Millis(init.op_timeout.count());
    o.fault_hook = init.fault_hook;
    const ftccl::Status env = ftccl::ApplyEnvOverrides(&o);
    if (!env.ok()) return FromFtccl(env).WithContext("ftccl environment");
    auto comm = ftccl::Communicator::Create(std::move(o));
    if (!comm.ok()) return FromFtccl(comm.status());
    comm_ = std::move(comm).value();
    return Status::Ok();
  }

  Status Run(const workload::OpArgs& a, std::chrono::milliseconds timeout) override {
    if (comm_ == nullptr) return Internal("ftccl: Run before Init");
    const auto dt = ftccl::ParseDataType(workload::DTypeName(a.dtype));
    const auto op = ftccl::ParseReduceOp(workload::RedOpName(a.redop));
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

  Status Finish(std::chrono::milliseconds timeout) override {
    if (comm_ == nullptr) return Internal("ftccl: Finish before Init");
    return FromFtccl(comm_->Barrier(ftccl::Millis(timeout.count())));
  }

  bool EmitsEvents() const override { return true; }

  std::vector<CclEvent> DrainEvents() override {
    std::vector<CclEvent> out;
    if (comm_ == nullptr) return out;
    for (const ftccl::Event& e : comm_->DrainEvents()) {
      auto kind = ParseEventKind(ftccl::EventKindName(e.kind));
      if (!kind) continue;
      CclEvent c;
      c.time_ns = e.time_ns;
      c.rank = comm_->rank();
      c.kind = *kind;
      c.path = e.rail;
      c.peer = e.peer;
      c.reason = e.reason;
      if (e.peer >= 0) c.reason = "rank " + std::to_string(e.peer) + ": " + c.reason;
      out.push_back(std::move(c));
    }
    return out;
  }

 private:
  std::unique_ptr<ftccl::Communicator> comm_;
};

}  // namespace

std::unique_ptr<CclAdapter> NewFtcclAdapter() { return std::make_unique<FtcclAdapter>(); }

}  // namespace faultline::runner
