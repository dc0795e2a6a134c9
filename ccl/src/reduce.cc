#include "reduce.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace ftccl {
namespace {

struct Sum {
  template <typename T>
  static T Apply(T x, T y) {
    return static_cast<T>(x + y);
  }
};
struct Prod {
  template <typename T>
  static T Apply(T x, T y) {
    return static_cast<T>(x * y);
  }
};
struct Min {
  template <typename T>
  static T Apply(T x, T y) {
    return std::min(x, y);
  }
};
struct Max {
  template <typename T>
  static T Apply(T x, T y) {
    return std::max(x, y);
  }
};

// The caller's buffers may sit at any address (the API takes unaligned ones): elements are
// read and written through memcpy, which compiles to plain unaligned moves.
template <typename T>
T Load(const T* p, size_t i) {
  T v;
  std::memcpy(&v, p + i, sizeof(T));
  return v;
}
template <typename T>
void Store(T* p, size_t i, T v) {
  std::memcpy(p + i, &v, sizeof(T));
}

template <typename Op, typename T>
void Loop(T* dst, const T* a, const T* b, size_t n) {
  for (size_t i = 0; i < n; ++i) Store(dst, i, Op::Apply(Load(a, i), Load(b, i)));
}

// u8 arithmetic must wrap: compute in unsigned int and truncate.
template <typename Op>
void LoopU8(uint8_t* dst, const uint8_t* a, const uint8_t* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    dst[i] = static_cast<uint8_t>(Op::Apply(static_cast<unsigned>(a[i]), static_cast<unsigned>(b[i])));
  }
}

// Signed integer overflow is undefined in C++: do sum/prod in the unsigned type (two's
// complement wrap), min/max in the signed type.
template <typename Op, typename S, typename U>
void LoopInt(S* dst, const S* a, const S* b, size_t n) {
  if constexpr (std::is_same_v<Op, Sum> || std::is_same_v<Op, Prod>) {
    for (size_t i = 0; i < n; ++i) {
      Store(dst, i, static_cast<S>(Op::Apply(static_cast<U>(Load(a, i)), static_cast<U>(Load(b, i)))));
    }
  } else {
    Loop<Op>(dst, a, b, n);
  }
}

template <typename Op, uint16_t (*ToBits)(float), float (*FromBits)(uint16_t)>
void LoopHalf(uint16_t* dst, const uint16_t* a, const uint16_t* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    Store(dst, i, ToBits(Op::Apply(FromBits(Load(a, i)), FromBits(Load(b, i)))));
  }
}

template <typename Op>
void Dispatch(DataType dt, void* dst, const void* a, const void* b, size_t n) {
  switch (dt) {
    case DataType::kF32:
      Loop<Op>(static_cast<float*>(dst), static_cast<const float*>(a),
               static_cast<const float*>(b), n);
      break;
    case DataType::kF64:
      Loop<Op>(static_cast<double*>(dst), static_cast<const double*>(a),
               static_cast<const double*>(b), n);
      break;
    case DataType::kF16:
      LoopHalf<Op, FloatToHalf, HalfToFloat>(static_cast<uint16_t*>(dst),
                                             static_cast<const uint16_t*>(a),
                                             static_cast<const uint16_t*>(b), n);
      break;
    case DataType::kBF16:
      LoopHalf<Op, FloatToBF16, BF16ToFloat>(static_cast<uint16_t*>(dst),
                                             static_cast<const uint16_t*>(a),
                                             static_cast<const uint16_t*>(b), n);
      break;
    case DataType::kI32:
      LoopInt<Op, int32_t, uint32_t>(static_cast<int32_t*>(dst), static_cast<const int32_t*>(a),
                                     static_cast<const int32_t*>(b), n);
      break;
    case DataType::kI64:
      LoopInt<Op, int64_t, uint64_t>(static_cast<int64_t*>(dst), static_cast<const int64_t*>(a),
                                     static_cast<const int64_t*>(b), n);
      break;
    case DataType::kU8:
      LoopU8<Op>(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(a),
                 static_cast<const uint8_t*>(b), n);
      break;
  }
}

}  // namespace

void ReduceInto(DataType dt, ReduceOp op, void* dst, const void* a, const void* b, size_t count) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      Dispatch<Sum>(dt, dst, a, b, count);
      break;
    case ReduceOp::kProd:
      Dispatch<Prod>(dt, dst, a, b, count);
      break;
    case ReduceOp::kMin:
      Dispatch<Min>(dt, dst, a, b, count);
      break;
    case ReduceOp::kMax:
      Dispatch<Max>(dt, dst, a, b, count);
      break;
  }
}

void FinalizeReduce(DataType dt, ReduceOp op, void* buf, size_t n, int nranks) {
  if (op != ReduceOp::kAvg || nranks == 1) return;
  switch (dt) {
    case DataType::kF32: {
      auto* p = static_cast<float*>(buf);
      for (size_t i = 0; i < n; ++i) Store(p, i, Load(p, i) / static_cast<float>(nranks));
      break;
    }
    case DataType::kF64: {
      auto* p = static_cast<double*>(buf);
      for (size_t i = 0; i < n; ++i) Store(p, i, Load(p, i) / static_cast<double>(nranks));
      break;
    }
    case DataType::kF16: {
      auto* p = static_cast<uint16_t*>(buf);
      for (size_t i = 0; i < n; ++i) {
        Store(p, i, FloatToHalf(HalfToFloat(Load(p, i)) / static_cast<float>(nranks)));
      }
      break;
    }
    case DataType::kBF16: {
      auto* p = static_cast<uint16_t*>(buf);
      for (size_t i = 0; i < n; ++i) {
        Store(p, i, FloatToBF16(BF16ToFloat(Load(p, i)) / static_cast<float>(nranks)));
      }
      break;
    }
    case DataType::kI32: {
      auto* p = static_cast<int32_t*>(buf);
      for (size_t i = 0; i < n; ++i) Store(p, i, static_cast<int32_t>(Load(p, i) / nranks));
      break;
    }
    case DataType::kI64: {
      auto* p = static_cast<int64_t*>(buf);
      for (size_t i = 0; i < n; ++i) Store(p, i, static_cast<int64_t>(Load(p, i) / nranks));
      break;
    }
    case DataType::kU8: {
      auto* p = static_cast<uint8_t*>(buf);
      for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(p[i] / nranks);
      break;
    }
  }
}

}  // namespace ftccl
