// Collective workloads shared by the benchmarks and the runner's worker: the collectives, element
// types and reductions they run, the buffer layout of one message size, the nccl-tests busbw
// factors, and one collective's arguments. The analytically known check values are in
// check_values.h. Pure functions and value types; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "base/status.h"

namespace faultline::workload {

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

// Errors are the project's Status (base/status.h).
using ::faultline::Status;

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

// busbw / algbw (nccl-tests): allreduce 2(n-1)/n; allgather, reducescatter, alltoall (n-1)/n;
// broadcast 1; 0 when ranks < 1. The project's one copy of this rule: the worker's log header,
// the runner's metrics and the benchmarks all take their factor from here.
double BusBwFactor(Coll c, int ranks);
// The same by the collective's name (CollName's spelling), also for the two a scenario may name
// that Coll has no member for: "reduce" 1 (as nccl-tests) and "barrier" 0 (it moves no data).
// nullopt for any other name.
std::optional<double> BusBwFactorOf(std::string_view op, int ranks);

// "1048576", "64K", "1M", "1MiB", "2G" (binary multiples); nullopt when malformed.
std::optional<size_t> ParseBytes(const std::string& text);

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

}  // namespace faultline::workload
