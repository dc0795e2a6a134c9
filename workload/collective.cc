#include "workload/collective.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace faultline::workload {
namespace {

struct NamedColl {
  const char* name;
  Coll value;
};
constexpr NamedColl kColls[] = {{"allreduce", Coll::kAllReduce},
                                {"allgather", Coll::kAllGather},
                                {"reducescatter", Coll::kReduceScatter},
                                {"broadcast", Coll::kBroadcast},
                                {"alltoall", Coll::kAllToAll}};

struct NamedDType {
  const char* name;
  DType value;
};
// The first name of each type is the canonical one; the others are nccl-tests' spellings.
constexpr NamedDType kDTypes[] = {
    {"f32", DType::kF32},   {"f64", DType::kF64},       {"f16", DType::kF16},
    {"bf16", DType::kBF16}, {"i32", DType::kI32},       {"i64", DType::kI64},
    {"u8", DType::kU8},     {"float", DType::kF32},     {"double", DType::kF64},
    {"half", DType::kF16},  {"bfloat16", DType::kBF16}, {"int32", DType::kI32},
    {"int", DType::kI32},   {"int64", DType::kI64},     {"uint8", DType::kU8}};

struct NamedRedOp {
  const char* name;
  RedOp value;
};
constexpr NamedRedOp kRedOps[] = {{"sum", RedOp::kSum},
                                  {"prod", RedOp::kProd},
                                  {"min", RedOp::kMin},
                                  {"max", RedOp::kMax},
                                  {"avg", RedOp::kAvg}};

// ---- check values -------------------------------------------------------------------------
}  // namespace

const char* CollName(Coll c) {
  for (const auto& n : kColls) {
    if (n.value == c) return n.name;
  }
  return "?";
}

const char* DTypeName(DType t) {
  for (const auto& n : kDTypes) {
    if (n.value == t) return n.name;
  }
  return "?";
}

const char* RedOpName(RedOp op) {
  for (const auto& n : kRedOps) {
    if (n.value == op) return n.name;
  }
  return "?";
}

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF64:
    case DType::kI64:
      return 8;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kU8:
      return 1;
  }
  return 1;
}

std::optional<Coll> ParseColl(std::string_view name) {
  for (const auto& n : kColls) {
    if (name == n.name) return n.value;
  }
  return std::nullopt;
}

std::optional<DType> ParseDType(std::string_view name) {
  for (const auto& n : kDTypes) {
    if (name == n.name) return n.value;
  }
  return std::nullopt;
}

std::optional<RedOp> ParseRedOp(std::string_view name) {
  for (const auto& n : kRedOps) {
    if (name == n.name) return n.value;
  }
  return std::nullopt;
}

bool IsReduction(Coll c) { return c == Coll::kAllReduce || c == Coll::kReduceScatter; }

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u);   // NaN
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // overflow: inf
  if (abs < 0x38800000u) {                                               // subnormal or zero
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // 14..24
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = ((abs >> 13) - (112u << 10));
  const uint32_t rem = abs & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  uint32_t x;
  if (exp == 0x1F) {
    x = sign | 0x7F800000u | (mant << 13);
  } else if (exp != 0) {
    x = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    x = sign;
  } else {  // subnormal: normalise
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    x = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3FFu) << 13);
  }
  float f;
  std::memcpy(&f, &x, sizeof(f));
  return f;
}

uint16_t FloatToBF16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
  const uint32_t round = 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + round) >> 16);
}

float BF16ToFloat(uint16_t b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, sizeof(f));
  return f;
}

SizeLayout LayoutFor(Coll c, DType t, int ranks, size_t bytes) {
  const size_t ts = DTypeSize(t);
  const size_t n = static_cast<size_t>(ranks);
  SizeLayout l;
  switch (c) {
    case Coll::kAllReduce:
    case Coll::kBroadcast:
      l.count = std::max<size_t>(1, bytes / ts);
      l.send_elems = l.count;
      l.recv_elems = l.count;
      l.bytes = l.count * ts;
      break;
    case Coll::kAllGather:
      l.count = std::max<size_t>(1, bytes / (n * ts));
      l.send_elems = l.count;
      l.recv_elems = l.count * n;
      l.bytes = l.count * n * ts;
      break;
    case Coll::kReduceScatter:
      l.count = std::max<size_t>(1, bytes / (n * ts));
      l.send_elems = l.count * n;
      l.recv_elems = l.count;
      l.bytes = l.count * n * ts;
      break;
    case Coll::kAllToAll:
      l.count = std::max<size_t>(1, bytes / (n * ts));
      l.send_elems = l.count * n;
      l.recv_elems = l.count * n;
      l.bytes = l.count * n * ts;
      break;
  }
  l.print_count = l.bytes / ts;
  return l;
}

double BusBwFactor(Coll c, int ranks) {
  if (ranks < 1) return 0.0;
  const double n = ranks;
  switch (c) {
    case Coll::kAllReduce:
      return 2.0 * (n - 1) / n;
    case Coll::kAllGather:
    case Coll::kReduceScatter:
    case Coll::kAllToAll:
      return (n - 1) / n;
    case Coll::kBroadcast:
      return 1.0;
  }
  return 1.0;
}

std::optional<double> BusBwFactorOf(std::string_view op, int ranks) {
  if (const auto c = ParseColl(op)) return BusBwFactor(*c, ranks);
  if (op == "reduce") return ranks < 1 ? 0.0 : 1.0;
  if (op == "barrier") return 0.0;
  return std::nullopt;
}

// "1048576", "64K", "1M", "1MiB", "2G" (binary multiples).
std::optional<size_t> ParseBytes(const std::string& text) {
  if (text.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str()) return std::nullopt;
  std::string suffix(end);
  for (char& ch : suffix) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  size_t mult = 1;
  if (suffix.empty() || suffix == "B") {
    mult = 1;
  } else if (suffix == "K" || suffix == "KB" || suffix == "KIB") {
    mult = size_t{1} << 10;
  } else if (suffix == "M" || suffix == "MB" || suffix == "MIB") {
    mult = size_t{1} << 20;
  } else if (suffix == "G" || suffix == "GB" || suffix == "GIB") {
    mult = size_t{1} << 30;
  } else {
    return std::nullopt;
  }
  return static_cast<size_t>(v) * mult;
}

}  // namespace faultline::workload
