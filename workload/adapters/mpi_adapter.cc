// The MPI adapter: the five collectives on a duplicate of MPI_COMM_WORLD, as the MPI's own
// launcher started the world (runner/exec/mpi_launcher.h); the rank and size the runner gives
// must be the ones MPI_Init found. One source, two libraries: compiled against Open MPI's
// mpi.h it is the openmpi adapter (started by mpirun), against MPICH's the mpich adapter
// (started by Hydra's mpiexec, linked into faultline-worker-mpich: the two MPIs define the same
// symbols and never share a process). The transport is whatever the launcher configured (Open
// MPI: the ob1 PML with the TCP BTL on the rail interfaces only, or UCX; MPICH: its ch4 device
// over UCX's TCP transport on the rails): the adapter chooses no interface itself, and the
// rail list, bootstrap address and store directory are not used.
//
// Options come through the environment the launcher gives every rank: FAULTLINE_MPI_ERRORS
// ("return", the default: MPI_ERRORS_RETURN on the communicator, so that a failed call is a
// Status carrying MPI_Error_string's text; "fatal": MPI_ERRORS_ARE_FATAL, the library ends
// the job itself). The transport settings are the launcher's (OMPI_MCA_*, UCX_*), reported by
// Knobs().
//
// Deadlines: every collective and the barrier is the non-blocking MPI-3 call, completed by
// MPI_Test until its deadline; past it the call returns kUnavailable with the request
// still pending (the adapter is then unusable: the caller aborts). MPI cannot cancel a
// collective, so Abort only stops using the communicator; the destructor finalizes MPI after
// a clean run and skips MPI_Finalize after an abort or a failed call (which would wait for the
// failed peers), leaving the job's end to the launcher. f16 and bf16 reduce through
// user-defined MPI operations on 16-bit words; avg is a sum divided by the rank count
// afterwards.
//
// The C API only: mpi.h would otherwise pull in the MPI's deprecated C++ bindings.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>
#include <time.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "workload/adapters/ccl_adapter.h"

namespace faultline::workload::adapters {
namespace {

// What tells the two MPIs apart: the name, the variable by which their launcher marks the
// ranks it started, and the factory.
#if defined(OPEN_MPI)
constexpr const char* kName = "openmpi";
constexpr const char* kLauncherMark = "OMPI_COMM_WORLD_RANK";
constexpr const char* kLauncher = "Open MPI's mpirun";
constexpr const char* kKnobNames[] = {
    "OMPI_MCA_pml",    "OMPI_MCA_btl", "OMPI_MCA_btl_tcp_if_include", "OMPI_MCA_oob_tcp_if_include",
    "UCX_NET_DEVICES", "UCX_TLS"};
#define FAULTLINE_MPI_FACTORY NewOpenmpiAdapter
#elif defined(MPICH_VERSION)
constexpr const char* kName = "mpich";
constexpr const char* kLauncherMark = "PMI_RANK";
constexpr const char* kLauncher = "MPICH's Hydra mpiexec";
constexpr const char* kKnobNames[] = {"UCX_NET_DEVICES", "UCX_TLS"};
#define FAULTLINE_MPI_FACTORY NewMpichAdapter
#else
#error "mpi_adapter.cc: this mpi.h is neither Open MPI's nor MPICH's"
#endif

// "<name>: " + what, the prefix of every message (the library's name, as in events.jsonl).
std::string Prefixed(const std::string& what) { return std::string(kName) + ": " + what; }

// MPI_Get_library_version's text (callable before MPI_Init); "" when it fails.
std::string LibraryText() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) return "";
  return std::string(text, len);
}

// The value of the line "KEY<blanks>VALUE" of `text` (MPICH's library string); "" when absent.
[[maybe_unused]] std::string Field(const std::string& text, const std::string& key) {
  const size_t at = text.find(key);
  if (at == std::string::npos) return "";
  const size_t from = text.find_first_not_of(" \t", at + key.size());
  if (from == std::string::npos) return "";
  const size_t end = text.find('\n', from);
  std::string v = text.substr(from, end == std::string::npos ? std::string::npos : end - from);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t' || v.back() == '\r')) v.pop_back();
  return v;
}

std::string MpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, len);
}

// 16-bit float reductions: Combine in float, rounded back after every step.
template <typename C, RedOp kOp>
void Reduce16(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = C::Encode(Combine(kOp, C::Decode(a[i]), C::Decode(b[i])));
}

template <typename C>
MPI_User_function* Reduce16For(RedOp op) {
  switch (op) {
    case RedOp::kProd:
      return &Reduce16<C, RedOp::kProd>;
    case RedOp::kMin:
      return &Reduce16<C, RedOp::kMin>;
    case RedOp::kMax:
      return &Reduce16<C, RedOp::kMax>;
    case RedOp::kSum:
    case RedOp::kAvg:
      break;
  }
  return &Reduce16<C, RedOp::kSum>;
}

template <typename C>
struct DivideBy {
  static void Run(void* data, size_t n, int ranks) {
    using A = typename C::Arith;
    auto* p = static_cast<typename C::Storage*>(data);
    for (size_t i = 0; i < n; ++i) p[i] = C::Encode(C::Decode(p[i]) / static_cast<A>(ranks));
  }
};

MPI_Datatype MpiType(DType t) {
  switch (t) {
    case DType::kF32:
      return MPI_FLOAT;
    case DType::kF64:
      return MPI_DOUBLE;
    case DType::kI32:
      return MPI_INT32_T;
    case DType::kI64:
      return MPI_INT64_T;
    case DType::kF16:
    case DType::kBF16:
      return MPI_UINT16_T;
    case DType::kU8:
      break;
  }
  return MPI_UINT8_T;
}

MPI_Op BuiltinOp(RedOp op) {
  switch (op) {
    case RedOp::kProd:
      return MPI_PROD;
    case RedOp::kMin:
      return MPI_MIN;
    case RedOp::kMax:
      return MPI_MAX;
    case RedOp::kSum:
    case RedOp::kAvg:
      break;
  }
  return MPI_SUM;
}

void SleepNs(int64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  nanosleep(&ts, nullptr);
}

class MpiAdapter final : public CclAdapter {
 public:
  ~MpiAdapter() override {
    FreeOps();
    if (comm_ != MPI_COMM_NULL && !failed_) MPI_Comm_free(&comm_);
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized && !failed_) MPI_Finalize();
  }

  std::string Name() const override { return kName; }

  Status Init(const CclInit& init) override {
    if (!init.fault_hook.empty()) return InvalidArgument(Prefixed("serves no fault hook"));
    if (!init.allreduce_algorithm.empty()) {
      return InvalidArgument(Prefixed("the allreduce algorithm is the library's own"));
    }
    const char* errors = std::getenv("FAULTLINE_MPI_ERRORS");
    errors_ = errors != nullptr && *errors != '\0' ? errors : "return";
    if (errors_ != "return" && errors_ != "fatal") {
      return InvalidArgument(Prefixed("FAULTLINE_MPI_ERRORS='") + errors_ +
                             "' (ccl_options.errors: return or fatal)");
    }
    if (std::getenv(kLauncherMark) == nullptr) {
      return InvalidArgument(Prefixed(std::string("this rank was not started by ") + kLauncher +
                                      " (no " + kLauncherMark + ")"));
    }
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) return Unavailable(Prefixed("MPI_Init_thread: " + MpiErrorText(rc)));
    int rank = -1, size = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank != init.rank || size != init.size) {
      failed_ = true;
      return InvalidArgument(Prefixed("the launcher made this rank ") + std::to_string(rank) +
                             " of " + std::to_string(size) + ", the runner placed it as " +
                             std::to_string(init.rank) + " of " + std::to_string(init.size));
    }
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    if (rc != MPI_SUCCESS) return Unavailable(Prefixed("MPI_Comm_dup: " + MpiErrorText(rc)));
    MPI_Comm_set_errhandler(comm_, errors_ == "fatal" ? MPI_ERRORS_ARE_FATAL : MPI_ERRORS_RETURN);
    size_ = size;
    return Status::Ok();
  }

  Status Prepare(const OpArgs& args) override {
    if (comm_ == MPI_COMM_NULL) return Internal(Prefixed("Prepare before Init"));
    FreeOps();
    if (IsReduction(args.coll) && (args.dtype == DType::kF16 || args.dtype == DType::kBF16)) {
      MPI_User_function* fn = args.dtype == DType::kF16 ? Reduce16For<HalfCodec>(args.redop)
                                                        : Reduce16For<BF16Codec>(args.redop);
      const int rc = MPI_Op_create(fn, /*commute=*/1, &user_op_);
      if (rc != MPI_SUCCESS) return Unavailable(Prefixed("MPI_Op_create: " + MpiErrorText(rc)));
    }
    return Status::Ok();
  }

  Status Run(const OpArgs& a, std::chrono::milliseconds timeout) override {
    if (comm_ == MPI_COMM_NULL || failed_)
      return Internal(Prefixed("Run before Init or after a failure"));
    const MPI_Datatype type = MpiType(a.dtype);
    const MPI_Op op = user_op_ != MPI_OP_NULL ? user_op_ : BuiltinOp(a.redop);
    const int n = static_cast<int>(a.count);
    if (a.count > static_cast<size_t>(INT32_MAX)) {
      return InvalidArgument(Prefixed("count " + std::to_string(a.count) + " exceeds MPI's int"));
    }
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = MPI_SUCCESS;
    const char* call = "";
    switch (a.coll) {
      case Coll::kAllReduce:
        call = "MPI_Iallreduce";
        rc = MPI_Iallreduce(a.send, a.recv, n, type, op, comm_, &req);
        break;
      case Coll::kAllGather:
        call = "MPI_Iallgather";
        rc = MPI_Iallgather(a.send, n, type, a.recv, n, type, comm_, &req);
        break;
      case Coll::kReduceScatter:
        call = "MPI_Ireduce_scatter_block";
        rc = MPI_Ireduce_scatter_block(a.send, a.recv, n, type, op, comm_, &req);
        break;
      case Coll::kBroadcast: {
        call = "MPI_Ibcast";
        int rank = 0;
        MPI_Comm_rank(comm_, &rank);
        if (rank == a.root && a.send != a.recv) {
          std::memcpy(a.recv, a.send, a.count * DTypeSize(a.dtype));
        }
        rc = MPI_Ibcast(a.recv, n, type, a.root, comm_, &req);
        break;
      }
      case Coll::kAllToAll:
        call = "MPI_Ialltoall";
        rc = MPI_Ialltoall(a.send, n, type, a.recv, n, type, comm_, &req);
        break;
    }
    Status st = rc == MPI_SUCCESS ? Complete(&req, timeout, call) : Failed(call, rc);
    if (!st.ok()) return st;
    if (IsReduction(a.coll) && a.redop == RedOp::kAvg) {
      DispatchType<DivideBy>(a.dtype, a.recv, a.count, size_);
    }
    return Status::Ok();
  }

  Status Barrier(std::chrono::milliseconds timeout) override {
    if (comm_ == MPI_COMM_NULL || failed_) {
      return Internal(Prefixed("Barrier before Init or after a failure"));
    }
    MPI_Request req = MPI_REQUEST_NULL;
    const int rc = MPI_Ibarrier(comm_, &req);
    return rc == MPI_SUCCESS ? Complete(&req, timeout, "MPI_Ibarrier") : Failed("MPI_Ibarrier", rc);
  }

  // Open MPI has no way to cancel a started collective or to leave a communicator alone; the
  // adapter stops using it and leaves MPI unfinalized (mpirun ends the job).
  void Abort(const std::string& /*reason*/) override { failed_ = true; }

  bool EmitsEvents() const override { return false; }

  // "4.1.4" or "4.0.2", from the library's own string ("Open MPI v4.1.4, package: ...";
  // MPICH's "MPICH Version:\t4.0.2\n...").
  std::string Version() const override {
    const std::string v = LibraryText();
#if defined(OPEN_MPI)
    const size_t at = v.find(" v");
    if (at == std::string::npos) return v.substr(0, v.find_first_of(",\n"));
    return v.substr(at + 2, v.find_first_of(",\n", at) - at - 2);
#else
    return Field(v, "MPICH Version:");
#endif
  }

  std::vector<std::pair<std::string, std::string>> Knobs() const override {
    std::vector<std::pair<std::string, std::string>> k;
    for (const char* name : kKnobNames) {
      const char* v = std::getenv(name);
      k.emplace_back(name, v != nullptr ? v : "");
    }
#if defined(MPICH_VERSION)
    // The device the library was built with ("ch4:ucx" in Debian's): its transport stack.
    k.emplace_back("device", Field(LibraryText(), "MPICH Device:"));
#endif
    // From the environment, not from Init: the worker records the knobs before it joins.
    const char* errors = std::getenv("FAULTLINE_MPI_ERRORS");
    const std::string e = errors != nullptr && *errors != '\0' ? errors : "return";
    k.emplace_back("errors", e == "fatal"    ? "MPI_ERRORS_ARE_FATAL"
                             : e == "return" ? "MPI_ERRORS_RETURN"
                                             : e);
    return k;
  }

 private:
  Status Failed(const char* call, int rc) {
    failed_ = true;
    return Unavailable(Prefixed(call + std::string(": ") + MpiErrorText(rc)));
  }

  // Tests `req` until it completes, fails or the deadline passes: spins for the first
  // millisecond (a collective of a few KiB), then sleeps 100 us between tests.
  Status Complete(MPI_Request* req, std::chrono::milliseconds timeout, const char* call) {
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + timeout;
    for (;;) {
      int done = 0;
      MPI_Status status;
      const int rc = MPI_Test(req, &done, &status);
      if (rc != MPI_SUCCESS) return Failed(call, rc == MPI_ERR_IN_STATUS ? status.MPI_ERROR : rc);
      if (done) return Status::Ok();
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) {
        failed_ = true;
        return Unavailable(Prefixed(call + std::string(" did not complete within ")) +
                           std::to_string(timeout.count()) + " ms");
      }
      if (now - start > std::chrono::milliseconds(1)) SleepNs(100000);
    }
  }

  void FreeOps() {
    if (user_op_ != MPI_OP_NULL) {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Op_free(&user_op_);
      user_op_ = MPI_OP_NULL;
    }
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Op user_op_ = MPI_OP_NULL;
  int size_ = 0;
  std::string errors_ = "return";
  bool failed_ = false;
};

}  // namespace

std::unique_ptr<CclAdapter> FAULTLINE_MPI_FACTORY() { return std::make_unique<MpiAdapter>(); }

}  // namespace faultline::workload::adapters
