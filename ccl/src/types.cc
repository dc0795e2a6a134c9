#include "ftccl/types.h"

#include "ftccl/communicator.h"

#include <cstring>

namespace ftccl {

size_t DataTypeSize(DataType t) {
  switch (t) {
    case DataType::kF32: return 4;
    case DataType::kF64: return 8;
    case DataType::kF16: return 2;
    case DataType::kBF16: return 2;
    case DataType::kI32: return 4;
    case DataType::kI64: return 8;
    case DataType::kU8: return 1;
  }
  return 0;
}

namespace {
constexpr const char* kTypeNames[] = {"f32", "f64", "f16", "bf16", "i32", "i64", "u8"};
constexpr const char* kOpNames[] = {"sum", "prod", "min", "max", "avg"};
constexpr const char* kCollNames[] = {"allreduce", "allgather", "reducescatter", "broadcast",
                                      "reduce",    "alltoall",  "barrier"};
}  // namespace

const char* DataTypeName(DataType t) {
  auto i = static_cast<size_t>(t);
  return i < std::size(kTypeNames) ? kTypeNames[i] : "?";
}

std::optional<DataType> ParseDataType(std::string_view name) {
  for (size_t i = 0; i < std::size(kTypeNames); ++i) {
    if (name == kTypeNames[i]) return static_cast<DataType>(i);
  }
  if (name == "float" || name == "float32") return DataType::kF32;
  if (name == "double" || name == "float64") return DataType::kF64;
  if (name == "half" || name == "float16") return DataType::kF16;
  if (name == "bfloat16") return DataType::kBF16;
  if (name == "int32") return DataType::kI32;
  if (name == "int64") return DataType::kI64;
  if (name == "uint8") return DataType::kU8;
  return std::nullopt;
}

const char* ReduceOpName(ReduceOp op) {
  auto i = static_cast<size_t>(op);
  return i < std::size(kOpNames) ? kOpNames[i] : "?";
}

std::optional<ReduceOp> ParseReduceOp(std::string_view name) {
  for (size_t i = 0; i < std::size(kOpNames); ++i) {
    if (name == kOpNames[i]) return static_cast<ReduceOp>(i);
  }
  return std::nullopt;
}

const char* CollKindName(CollKind k) {
  auto i = static_cast<size_t>(k);
  return i < std::size(kCollNames) ? kCollNames[i] : "?";
}

std::optional<CollKind> ParseCollKind(std::string_view name) {
  for (size_t i = 0; i < std::size(kCollNames); ++i) {
    if (name == kCollNames[i]) return static_cast<CollKind>(i);
  }
  if (name == "reduce_scatter") return CollKind::kReduceScatter;
  if (name == "all_reduce") return CollKind::kAllReduce;
  if (name == "all_gather") return CollKind::kAllGather;
  if (name == "all_to_all") return CollKind::kAllToAll;
  return std::nullopt;
}

namespace {
uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace

uint16_t FloatToHalf(float f) {
  uint32_t x = FloatBits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t exp = (x >> 23) & 0xFFu;
  uint32_t mant = x & 0x7FFFFFu;
  if (exp == 0xFF) {  // inf or NaN
    if (mant == 0) return static_cast<uint16_t>(sign | 0x7C00u);
    return static_cast<uint16_t>(sign | 0x7E00u | (mant >> 13));
  }
  int32_t e = static_cast<int32_t>(exp) - 127 + 15;
  if (e >= 0x1F) return static_cast<uint16_t>(sign | 0x7C00u);  // overflow -> inf
  if (e <= 0) {
    // Subnormal half (or zero): shift the full mantissa (with the implicit 1) into place.
    if (e < -10) return static_cast<uint16_t>(sign);
    uint32_t m = mant | 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half_m = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_m & 1u))) ++half_m;
    return static_cast<uint16_t>(sign | half_m);
  }
  uint32_t half = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;  // may carry into exp: correct
  return static_cast<uint16_t>(half);
}

float HalfToFloat(uint16_t h) {
  uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) return BitsFloat(sign | 0x7F800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0) return BitsFloat(sign);
    // Subnormal: normalise.
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    mant &= 0x3FFu;
    return BitsFloat(sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | (mant << 13));
  }
  return BitsFloat(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t FloatToBF16(float f) {
  uint32_t x = FloatBits(f);
  if ((x & 0x7F800000u) == 0x7F800000u && (x & 0x7FFFFFu) != 0) {
    return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  }
  uint32_t rounding = 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

float BF16ToFloat(uint16_t b) { return BitsFloat(static_cast<uint32_t>(b) << 16); }

const char* EventKindName(EventKind kind) {
  switch (kind) {
    case EventKind::kPathDown: return "path_down";
    case EventKind::kMigrated: return "migrated";
    case EventKind::kResumed: return "resumed";
    case EventKind::kRebalanced: return "rebalanced";
    case EventKind::kRelayOn: return "relay_on";
    case EventKind::kRelayOff: return "relay_off";
    case EventKind::kPathUp: return "path_up";
    case EventKind::kFailback: return "failback";
    case EventKind::kAbort: return "abort";
  }
  return "?";
}

}  // namespace ftccl
