// Shared harness of the collective benchmarks ftccl-perf and gloo-perf (nccl-tests style).
//
// A benchmark program supplies a PerfBackend: how to create one rank's communicator and how to
// run one collective on it. PerfMain does the rest, identically for every library:
//  - parses the command line (CLI11; the flags of nccl-tests where they exist),
//  - binds the bootstrap listener on 127.0.0.1:0 and forks one process per rank,
//  - in every rank: fills the inputs, warms up, times `iters` back-to-back collectives per size,
//    and with --check runs one more collective into a poisoned output and counts the elements
//    that differ from the analytically known result,
//  - gathers every rank's mean per-iteration time and wrong count over a pipe to the parent,
//    which prints a table row once all ranks reported a size (time = max over ranks) and
//    writes the same as JSON with -J.
//
// Rail r of rank k is the loopback address 127.0.(r+1).(k+1); every 127/8 address is on lo.
//
// Nothing here throws across its interface: CLI11 and backend exceptions are caught inside and
// become exit codes or Status values. Not thread-safe; each rank is one process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace faultline::bench {

enum class Coll : uint8_t { kAllReduce = 0, kAllGather, kReduceScatter, kBroadcast, kAllToAll };
enum class DType : uint8_t { kF32 = 0, kF64, kF16, kBF16, kI32, kI64, kU8 };
enum class RedOp : uint8_t { kSum = 0, kProd, kMin, kMax, kAvg };

const char* CollName(Coll c);     // "allreduce", "allgather", "reducescatter", ...
const char* DTypeName(DType t);   // "f32", "f64", "f16", "bf16", "i32", "i64", "u8"
const char* RedOpName(RedOp op);  // "sum", "prod", "min", "max", "avg"
size_t DTypeSize(DType t);
std::optional<Coll> ParseColl(std::string_view name);
std::optional<DType> ParseDType(std::string_view name);  // also nccl-tests names: float, half...
std::optional<RedOp> ParseRedOp(std::string_view name);
bool IsReduction(Coll c);  // allreduce and reducescatter take a reduction operator

// IEEE half and bfloat16 conversions (round to nearest even), for check values and the
// reductions of libraries that have no 16-bit float type of their own.
uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);
uint16_t FloatToBF16(float f);
float BF16ToFloat(uint16_t b);

// Element codecs: the storage type, the type arithmetic happens in, and the conversions
// (f16 and bf16 compute in float and round back after every step).
template <typename S>
struct PlainCodec {
  using Storage = S;
  using Arith = S;
  static S Decode(S s) { return s; }
  static S Encode(S a) { return a; }
};
struct HalfCodec {
  using Storage = uint16_t;
  using Arith = float;
  static float Decode(uint16_t s) { return HalfToFloat(s); }
  static uint16_t Encode(float a) { return FloatToHalf(a); }
};
struct BF16Codec {
  using Storage = uint16_t;
  using Arith = float;
  static float Decode(uint16_t s) { return BF16ToFloat(s); }
  static uint16_t Encode(float a) { return FloatToBF16(a); }
};

// One reduction step in the arithmetic type. Integers wrap (two's complement) without undefined
// behaviour; avg combines as sum (the division comes once, at the end).
template <typename A>
A Combine(RedOp op, A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    if (op == RedOp::kSum || op == RedOp::kAvg) {
      return static_cast<A>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    }
    if (op == RedOp::kProd) {
      return static_cast<A>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
    }
  } else {
    if (op == RedOp::kSum || op == RedOp::kAvg) return a + b;
    if (op == RedOp::kProd) return a * b;
  }
  return op == RedOp::kMin ? (b < a ? b : a) : (a < b ? b : a);
}

// Calls F<Codec>::Run(args...) with the codec of `t`.
template <template <typename> class F, typename... Args>
auto DispatchType(DType t, Args&&... args) {
  switch (t) {
    case DType::kF32:
      return F<PlainCodec<float>>::Run(std::forward<Args>(args)...);
    case DType::kF64:
      return F<PlainCodec<double>>::Run(std::forward<Args>(args)...);
    case DType::kF16:
      return F<HalfCodec>::Run(std::forward<Args>(args)...);
    case DType::kBF16:
      return F<BF16Codec>::Run(std::forward<Args>(args)...);
    case DType::kI32:
      return F<PlainCodec<int32_t>>::Run(std::forward<Args>(args)...);
    case DType::kI64:
      return F<PlainCodec<int64_t>>::Run(std::forward<Args>(args)...);
    case DType::kU8:
      break;
  }
  return F<PlainCodec<uint8_t>>::Run(std::forward<Args>(args)...);
}

// Errors are values: ok, or a message saying what failed.
class [[nodiscard]] Status final {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message), true); }
  bool ok() const { return !failed_; }
  const std::string& message() const { return message_; }

 private:
  Status(std::string message, bool failed) : message_(std::move(message)), failed_(failed) {}
  std::string message_;
  bool failed_ = false;
};

struct PerfOptions {
  Coll coll = Coll::kAllReduce;
  size_t min_bytes = 32 << 20;
  size_t max_bytes = 32 << 20;
  double factor = 2;
  int iters = 20;
  int warmup = 5;
  int ranks = 4;
  int rails = 2;
  bool check = false;
  DType dtype = DType::kF32;
  RedOp redop = RedOp::kSum;
  int root = 0;
  int timeout_s = 120;  // deadline of one collective; the parent also kills ranks silent this long
  std::string json_path;
};

// Element counts of one size of the sweep. `count` is the count argument of the collective
// (ftccl's convention): allreduce/broadcast: elements of send and recv; allgather: elements each
// rank contributes; reducescatter: elements each rank receives; alltoall: elements per peer block.
struct SizeLayout {
  size_t bytes = 0;        // the size printed (nccl-tests: total bytes of the larger buffer)
  size_t count = 0;        // the collective's count argument
  size_t send_elems = 0;   // elements in the send buffer
  size_t recv_elems = 0;   // elements in the recv buffer
  size_t print_count = 0;  // the count printed: bytes / element size
};
SizeLayout LayoutFor(Coll c, DType t, int ranks, size_t bytes);

// Sizes from min to max, multiplying by factor (> 1); always includes min, never exceeds max.
std::vector<size_t> SizeSweep(size_t min_bytes, size_t max_bytes, double factor);

// busbw / algbw (nccl-tests): allreduce 2(n-1)/n; allgather, reducescatter, alltoall (n-1)/n;
// broadcast 1.
double BusBwFactor(Coll c, int ranks);

// Fills `send` of `rank` with the check values of this collective and size.
void FillInput(const PerfOptions& o, const SizeLayout& l, int rank, void* send);
// Counts the elements of `recv` on `rank` that differ from the known result.
uint64_t CountWrong(const PerfOptions& o, const SizeLayout& l, int rank, const void* recv);

// One collective's arguments, as handed to a backend.
struct OpArgs {
  Coll coll = Coll::kAllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // see SizeLayout::count
  DType dtype = DType::kF32;
  RedOp redop = RedOp::kSum;
  int root = 0;
};

// Where a rank runs; handed to the backend inside the rank's process.
struct RankEnv {
  int rank = 0;
  int size = 0;
  std::vector<std::string> rail_addrs;  // this rank's address on each rail
  std::string bootstrap;                // "127.0.0.1:PORT" of the parent's listening socket
  int bootstrap_listen_fd = -1;         // that listening socket; rank 0 only, -1 elsewhere
  std::string scratch_dir;              // empty directory private to this run, shared by ranks
  const PerfOptions* options = nullptr;
};

// One rank's connection to a library. Created and used inside one rank process.
class PerfCcl {
 public:
  virtual ~PerfCcl() = default;
  // Called once per size before the warm-up with the buffers every later Run of that size
  // uses. Setup cost spent here is not timed.
  virtual Status Prepare(const OpArgs& args) { return Status::Ok(); }
  // Runs one collective to completion.
  virtual Status Run(const OpArgs& args) = 0;
  virtual Status Barrier() = 0;
};

struct PerfBackend {
  std::string name;  // "ftccl", "gloo"
  // Extra header lines (e.g. how rails are used); may be empty.
  std::vector<std::string> notes;
  // Parent side: rejects options the library cannot run; nullptr accepts everything.
  std::function<Status(const PerfOptions&)> validate;
  // Parent side: effective knobs of the library, echoed in the header and the JSON.
  std::function<std::vector<std::pair<std::string, std::string>>(const PerfOptions&)> knobs;
  // Rank side: connects this rank. Owns (and may close) env.bootstrap_listen_fd.
  std::function<Status(const RankEnv&, std::unique_ptr<PerfCcl>*)> create;
};

// The whole program. Returns the exit code: 0 all fine; 1 wrong elements found; 2 bad
// command line; 3 a rank failed, crashed or hung (the message says which and why).
int PerfMain(int argc, char** argv, const PerfBackend& backend);

}  // namespace faultline::bench
