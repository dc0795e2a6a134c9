// Element types and reductions supported by ftccl collectives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ftccl {

enum class DataType : uint8_t { kF32 = 0, kF64, kF16, kBF16, kI32, kI64, kU8 };
inline constexpr int kNumDataTypes = 7;

// Reductions. Semantics per type:
//  - floating types (f32, f64): IEEE arithmetic in the type itself.
//  - f16 and bf16: each step converts both operands to float, applies the op and rounds the
//    result back to the type (round to nearest even).
//  - integer types: two's complement arithmetic in the type (u8 wraps modulo 256).
//  - avg: the sum over ranks, then divided by the rank count once at the end (integer
//    division truncating toward zero for integer types; for f16/bf16 in float, then rounded).
enum class ReduceOp : uint8_t { kSum = 0, kProd, kMin, kMax, kAvg };
inline constexpr int kNumReduceOps = 5;

size_t DataTypeSize(DataType t);
const char* DataTypeName(DataType t);         // "f32", "f64", "f16", "bf16", "i32", "i64", "u8"
std::optional<DataType> ParseDataType(std::string_view name);
const char* ReduceOpName(ReduceOp op);        // "sum", "prod", "min", "max", "avg"
std::optional<ReduceOp> ParseReduceOp(std::string_view name);

// IEEE half and bfloat16 conversions (round to nearest even; NaN stays NaN).
uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);
uint16_t FloatToBF16(float f);
float BF16ToFloat(uint16_t b);

// Collective kinds (used in logs, signatures and benchmarks).
enum class CollKind : uint8_t {
  kAllReduce = 0,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kAllToAll,
  kBarrier,
};
const char* CollKindName(CollKind k);  // "allreduce", "allgather", ...
std::optional<CollKind> ParseCollKind(std::string_view name);

}  // namespace ftccl
