#include <memory>
#include <string>
#include <vector>

#include "ftccl/communicator.h"
#include "ftccl/ftccl_c.h"

struct ftcclComm {
  std::unique_ptr<ftccl::Communicator> comm;
};

static_assert(static_cast<int>(ftccl::Code::kInternal) == ftcclInternalError, "result codes");
static_assert(static_cast<int>(ftccl::DataType::kU8) == ftcclU8, "data types");
static_assert(static_cast<int>(ftccl::ReduceOp::kAvg) == ftcclAvg, "reductions");

namespace {

thread_local std::string g_last_error;

ftcclResult ToResult(const ftccl::Status& st) {
  g_last_error = st.ok() ? "" : st.ToString();
  return static_cast<ftcclResult>(static_cast<int>(st.code()));
}

ftcclResult NullComm() {
  g_last_error = "INVALID_ARGUMENT: null communicator";
  return ftcclInvalidArgument;
}

ftccl::DataType Dt(ftcclDataType t) { return static_cast<ftccl::DataType>(t); }
ftccl::ReduceOp Op(ftcclRedOp o) { return static_cast<ftccl::ReduceOp>(o); }
ftccl::Millis Ms(uint32_t ms) { return ftccl::Millis(ms); }

}  // namespace

extern "C" {

ftcclResult ftcclCommInit(ftcclComm_t* comm, int rank, int size, const char* bootstrap,
                          const char* const* rails, int num_rails, uint32_t init_timeout_ms) {
  if (comm == nullptr || (num_rails > 0 && rails == nullptr) || num_rails < 0) {
    g_last_error = "INVALID_ARGUMENT: null argument";
    return ftcclInvalidArgument;
  }
  *comm = nullptr;
  ftccl::CommOptions o;
  o.rank = rank;
  o.size = size;
  o.bootstrap = bootstrap ? bootstrap : "";
  for (int i = 0; i < num_rails; ++i) o.rails.emplace_back(rails[i] ? rails[i] : "");
  if (init_timeout_ms > 0) o.init_timeout = ftccl::Millis(init_timeout_ms);
  auto c = ftccl::Communicator::Create(std::move(o));
  if (!c.ok()) return ToResult(c.status());
  *comm = new ftcclComm{std::move(c.value())};
  return ToResult(ftccl::Status::Ok());
}

void ftcclCommDestroy(ftcclComm_t comm) { delete comm; }

ftcclResult ftcclAllReduce(ftcclComm_t c, const void* s, void* r, size_t n, ftcclDataType dt,
                           ftcclRedOp op, uint32_t t) {
  if (!c) return NullComm();
  return ToResult(c->comm->AllReduce(s, r, n, Dt(dt), Op(op), Ms(t)));
}
ftcclResult ftcclAllGather(ftcclComm_t c, const void* s, void* r, size_t n, ftcclDataType dt,
                           uint32_t t) {
  if (!c) return NullComm();
  return ToResult(c->comm->AllGather(s, r, n, Dt(dt), Ms(t)));
}
ftcclResult ftcclReduceScatter(ftcclComm_t c, const void* s, void* r, size_t n, ftcclDataType dt,
                               ftcclRedOp op, uint32_t t) {
  if (!c) return NullComm();
  return ToResult(c->comm->ReduceScatter(s, r, n, Dt(dt), Op(op), Ms(t)));
}
ftcclResult ftcclBroadcast(ftcclComm_t c, const void* s, void* r, size_t n, ftcclDataType dt,
                           int root, uint32_t t) {
  if (!c) return NullComm();
  return ToResult(c->comm->Broadcast(s, r, n, Dt(dt), root, Ms(t)));
}
ftcclResult ftcclReduce(ftcclComm_t c, const void* s, void* r, size_t n, ftcclDataType dt,
                        ftcclRedOp op, int root, uint32_t t) {
  if (!c) return NullComm();
  return ToResult(c->comm->Reduce(s, r, n, Dt(dt), Op(op), root, Ms(t)));
}
ftcclResult ftcclAllToAll(ftcclComm_t c, const void* s, void* r, size_t n, ftcclDataType dt,
                          uint32_t t) {
  if (!c) return NullComm();
  return ToResult(c->comm->AllToAll(s, r, n, Dt(dt), Ms(t)));
}
ftcclResult ftcclBarrier(ftcclComm_t c, uint32_t t) {
  if (!c) return NullComm();
  return ToResult(c->comm->Barrier(Ms(t)));
}

int ftcclCommRank(ftcclComm_t c) { return c ? c->comm->rank() : -1; }
int ftcclCommSize(ftcclComm_t c) { return c ? c->comm->size() : -1; }

ftcclResult ftcclCommRevoke(ftcclComm_t c, const char* reason) {
  if (!c) return NullComm();
  c->comm->Revoke(reason ? reason : "");
  return ToResult(ftccl::Status::Ok());
}

int ftcclCommLostPeer(ftcclComm_t c) { return c ? c->comm->LostPeer() : -1; }

ftcclResult ftcclCommShrink(ftcclComm_t c, const int* excluded, int num_excluded,
                            uint32_t timeout_ms, ftcclComm_t* newcomm) {
  if (newcomm != nullptr) *newcomm = nullptr;
  if (!c) return NullComm();
  if (newcomm == nullptr || num_excluded < 0 || (num_excluded > 0 && excluded == nullptr)) {
    g_last_error = "INVALID_ARGUMENT: null argument";
    return ftcclInvalidArgument;
  }
  std::vector<int> ex(excluded, excluded + num_excluded);
  auto n = c->comm->Shrink(ex, Ms(timeout_ms));
  if (!n.ok()) return ToResult(n.status());
  *newcomm = new ftcclComm{std::move(n.value())};
  return ToResult(ftccl::Status::Ok());
}

const char* ftcclLastError(void) { return g_last_error.c_str(); }

const char* ftcclResultString(ftcclResult r) {
  return ftccl::CodeName(static_cast<ftccl::Code>(r));
}

}  // extern "C"
