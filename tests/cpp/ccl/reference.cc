#include "reference.h"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace ftccl::test {
namespace {

struct Format16 {
  int precision;  // significand bits, the implicit one included
  int exp_bits;
  int emin;
  int emax;
};

Format16 Describe(Half16 f) {
  return f == Half16::kF16 ? Format16{11, 5, -14, 15} : Format16{8, 8, -126, 127};
}

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

int Width(DataType dt) { return static_cast<int>(DataTypeSize(dt)) * 8; }

uint64_t Mask(DataType dt) {
  int w = Width(dt);
  return w == 64 ? ~0ULL : ((1ULL << w) - 1);
}

// Two's complement value of the low Width(dt) bits.
int64_t Signed(DataType dt, uint64_t bits) {
  int w = Width(dt);
  if (w == 64) return static_cast<int64_t>(bits);
  uint64_t sign = 1ULL << (w - 1);
  bits &= Mask(dt);
  return static_cast<int64_t>(bits ^ sign) - static_cast<int64_t>(sign);
}

double F32(double x) { return static_cast<double>(static_cast<float>(x)); }

double DecodeFloat(DataType dt, uint64_t bits) {
  switch (dt) {
    case DataType::kF64: {
      double d;
      std::memcpy(&d, &bits, 8);
      return d;
    }
    case DataType::kF32: {
      uint32_t b = static_cast<uint32_t>(bits);
      float f;
      std::memcpy(&f, &b, 4);
      return f;
    }
    case DataType::kF16:
      return Decode16(static_cast<uint16_t>(bits), Half16::kF16);
    default:
      return Decode16(static_cast<uint16_t>(bits), Half16::kBF16);
  }
}

constexpr double kProd16[] = {1, 2, 0.5, -1, -2, -0.5};
constexpr double kProd32[] = {1, 2, 3, 0.5, -1, -3, 1.5, -0.5};
constexpr double kProd64[] = {1, 3, 5, 7, 0.5, -2, -0.25, -1.5};

}  // namespace

double RoundTo16(double x, Half16 format) {
  if (std::isnan(x) || std::isinf(x) || x == 0) return x;
  const Format16 f = Describe(format);
  int e;
  std::frexp(std::fabs(x), &e);  // |x| in [2^(e-1), 2^e)
  const int exponent = std::max(e - 1, f.emin);
  const double quantum = std::ldexp(1.0, exponent - (f.precision - 1));
  // x / quantum is exact (power-of-two scaling); nearbyint rounds half to even.
  const double r = std::nearbyint(x / quantum) * quantum;
  const double max_finite = std::ldexp(2.0 - std::ldexp(1.0, 1 - f.precision), f.emax);
  if (std::fabs(r) > max_finite) return std::copysign(std::numeric_limits<double>::infinity(), x);
  return r;
}

uint16_t Encode16(double x, Half16 format) {
  const Format16 f = Describe(format);
  const int mant_bits = f.precision - 1;
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const uint16_t exp_all = static_cast<uint16_t>(((1 << f.exp_bits) - 1) << mant_bits);
  if (std::isnan(x)) return static_cast<uint16_t>(exp_all | (1 << (mant_bits - 1)));
  const double r = RoundTo16(x, format);
  if (std::isinf(r)) return static_cast<uint16_t>(sign | exp_all);
  const double a = std::fabs(r);
  if (a == 0) return sign;
  int e;
  std::frexp(a, &e);
  const int exponent = e - 1;
  if (exponent < f.emin) {  // subnormal: a = m * 2^(emin - mant_bits)
    const auto m = static_cast<uint16_t>(std::ldexp(a, mant_bits - f.emin));
    return static_cast<uint16_t>(sign | m);
  }
  const int bias = 1 - f.emin;
  const auto m = static_cast<uint16_t>(std::ldexp(a, mant_bits - exponent) - (1 << mant_bits));
  return static_cast<uint16_t>(sign | ((exponent + bias) << mant_bits) | m);
}

double Decode16(uint16_t bits, Half16 format) {
  const Format16 f = Describe(format);
  const int mant_bits = f.precision - 1;
  const bool negative = (bits & 0x8000) != 0;
  const int e = (bits >> mant_bits) & ((1 << f.exp_bits) - 1);
  const int m = bits & ((1 << mant_bits) - 1);
  const int bias = 1 - f.emin;
  double v;
  if (e == (1 << f.exp_bits) - 1) {
    v = m != 0 ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), f.emin - mant_bits);
  } else {
    v = std::ldexp(static_cast<double>(m + (1 << mant_bits)), e - bias - mant_bits);
  }
  return negative ? -v : v;
}

bool IsFloatType(DataType dt) {
  return dt == DataType::kF32 || dt == DataType::kF64 || dt == DataType::kF16 ||
         dt == DataType::kBF16;
}

uint16_t Encode16Exact(float f, Half16 format) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  if (format == Half16::kBF16) return static_cast<uint16_t>(b >> 16);
  const auto sign = static_cast<uint16_t>((b >> 16) & 0x8000);
  const int exp = static_cast<int>((b >> 23) & 0xff) - 127;
  const uint32_t mant = b & 0x7fffff;
  if (exp == 128) return static_cast<uint16_t>(sign | 0x7c00 | (mant != 0 ? 0x200 : 0));
  if (exp == -127 && mant == 0) return sign;
  if (exp >= -14) return static_cast<uint16_t>(sign | ((exp + 15) << 10) | (mant >> 13));
  return static_cast<uint16_t>(sign | ((0x800000 | mant) >> (13 + (-14 - exp))));
}

ReduceRef::ReduceRef(DataType dt, ReduceOp op, uint64_t salt)
    : dt_(dt), op_(op), key_(Mix(salt)), is_float_(IsFloatType(dt)), mask_(Mask(dt)) {
  if (!is_float_) return;
  // Sum/avg: `bits` signed bits and F fraction bits, so a sum over 8 ranks needs bits + 3
  // significand bits. Min/max: any value of the type (bits below the significand width).
  int frac = 0;
  const bool sum = op == ReduceOp::kSum || op == ReduceOp::kAvg;
  switch (dt) {
    case DataType::kF64:
      bits_ = sum ? 44 : 50, frac = sum ? 10 : 3;
      break;
    case DataType::kF32:
      bits_ = sum ? 20 : 23, frac = sum ? 4 : 3;
      break;
    case DataType::kF16:
      bits_ = sum ? 7 : 10, frac = sum ? 2 : 3;
      break;
    default:
      bits_ = sum ? 5 : 7, frac = sum ? 1 : 3;
      break;  // bf16
  }
  scale_ = std::ldexp(1.0, -frac);
  if (dt == DataType::kF64) {
    table_ = kProd64, table_size_ = std::size(kProd64);
  } else if (dt == DataType::kF32) {
    table_ = kProd32, table_size_ = std::size(kProd32);
  } else {
    table_ = kProd16, table_size_ = std::size(kProd16);
  }
}

// Hash, FloatInput, IntInput and EncodeExact are inlined into InputBits and ExpectedBits: they
// run per element, several times over, in every 64 MiB case.
[[gnu::always_inline]] inline uint64_t ReduceRef::Hash(int rank, uint64_t index) const {
  return Mix(key_ ^ (static_cast<uint64_t>(rank) << 48) ^ index);
}

[[gnu::always_inline]] inline double ReduceRef::FloatInput(uint64_t h) const {
  switch (op_) {
    case ReduceOp::kProd:
      return table_[h % table_size_];
    case ReduceOp::kMin:
    case ReduceOp::kMax:
      if ((h & 0x3f) == 0) {
        return (h & 0x40) ? std::numeric_limits<double>::infinity()
                          : -std::numeric_limits<double>::infinity();
      }
      [[fallthrough]];
    default: {
      const int64_t k = static_cast<int64_t>(h >> (64 - bits_)) - (int64_t{1} << (bits_ - 1));
      return static_cast<double>(k) * scale_;
    }
  }
}

[[gnu::always_inline]] inline uint64_t ReduceRef::IntInput(uint64_t h) const {
  if (op_ == ReduceOp::kProd) h |= 1;  // odd factors: the wrapped product never collapses to 0
  return h & mask_;
}

[[gnu::always_inline]] inline uint64_t ReduceRef::EncodeExact(double x) const {
  switch (dt_) {
    case DataType::kF64: {
      uint64_t b;
      std::memcpy(&b, &x, 8);
      return b;
    }
    case DataType::kF32: {
      const float f = static_cast<float>(x);
      uint32_t b;
      std::memcpy(&b, &f, 4);
      return b;
    }
    case DataType::kF16:
      return Encode16Exact(static_cast<float>(x), Half16::kF16);
    default:
      return Encode16Exact(static_cast<float>(x), Half16::kBF16);
  }
}

uint64_t ReduceRef::InputBits(int rank, uint64_t index) const {
  const uint64_t h = Hash(rank, index);
  return is_float_ ? EncodeExact(FloatInput(h)) : IntInput(h);
}

uint64_t ReduceRef::ExpectedBits(int ranks, uint64_t index) const {
  if (is_float_) {
    // Every partial result is exact by construction, so double arithmetic is exact too.
    double acc = FloatInput(Hash(0, index));
    for (int r = 1; r < ranks; ++r) {
      const double v = FloatInput(Hash(r, index));
      switch (op_) {
        case ReduceOp::kSum:
        case ReduceOp::kAvg:
          acc += v;
          break;
        case ReduceOp::kProd:
          acc *= v;
          break;
        case ReduceOp::kMin:
          acc = std::min(acc, v);
          break;
        case ReduceOp::kMax:
          acc = std::max(acc, v);
          break;
      }
    }
    if (op_ != ReduceOp::kAvg) return EncodeExact(acc);
    // avg: the exact sum divided once by the rank count, in the type (f32, f64) or in float
    // and then rounded (f16, bf16).
    switch (dt_) {
      case DataType::kF64:
        return EncodeExact(acc / ranks);
      case DataType::kF32:
        return EncodeExact(static_cast<float>(acc) / static_cast<float>(ranks));
      case DataType::kF16:
        return Encode16(F32(static_cast<float>(acc) / static_cast<float>(ranks)), Half16::kF16);
      default:
        return Encode16(F32(static_cast<float>(acc) / static_cast<float>(ranks)), Half16::kBF16);
    }
  }
  const bool is_signed = dt_ != DataType::kU8;
  uint64_t acc = IntInput(Hash(0, index));
  for (int r = 1; r < ranks; ++r) {
    const uint64_t v = IntInput(Hash(r, index));
    switch (op_) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        acc = (acc + v) & mask_;
        break;
      case ReduceOp::kProd:
        acc = (acc * v) & mask_;
        break;
      case ReduceOp::kMin:
        if (is_signed ? Signed(dt_, v) < Signed(dt_, acc) : v < acc) acc = v;
        break;
      case ReduceOp::kMax:
        if (is_signed ? Signed(dt_, v) > Signed(dt_, acc) : v > acc) acc = v;
        break;
    }
  }
  if (op_ == ReduceOp::kAvg) {
    if (is_signed) {
      acc = static_cast<uint64_t>(Signed(dt_, acc) / ranks) & mask_;  // truncates toward zero
    } else {
      acc = acc / static_cast<uint64_t>(ranks);
    }
  }
  return acc;
}

MoveRef::MoveRef(DataType dt, uint64_t salt) : key_(Mix(salt ^ 0x6d6f7665ULL)), mask_(Mask(dt)) {}

uint64_t MoveRef::Bits(int rank, uint64_t index) const {
  return Mix(key_ ^ (static_cast<uint64_t>(rank) << 48) ^ index) & mask_;
}

void StoreBits(void* buffer, DataType dt, size_t index, uint64_t bits) {
  uint8_t* p = static_cast<uint8_t*>(buffer);
  switch (dt) {
    case DataType::kU8:
      p[index] = static_cast<uint8_t>(bits);
      break;
    case DataType::kF16:
    case DataType::kBF16: {
      const auto v = static_cast<uint16_t>(bits);
      std::memcpy(p + index * 2, &v, 2);
      break;
    }
    case DataType::kF32:
    case DataType::kI32: {
      const auto v = static_cast<uint32_t>(bits);
      std::memcpy(p + index * 4, &v, 4);
      break;
    }
    default:
      std::memcpy(p + index * 8, &bits, 8);
      break;
  }
}

uint64_t LoadBits(const void* buffer, DataType dt, size_t index) {
  const uint8_t* p = static_cast<const uint8_t*>(buffer);
  switch (dt) {
    case DataType::kU8:
      return p[index];
    case DataType::kF16:
    case DataType::kBF16: {
      uint16_t v;
      std::memcpy(&v, p + index * 2, 2);
      return v;
    }
    case DataType::kF32:
    case DataType::kI32: {
      uint32_t v;
      std::memcpy(&v, p + index * 4, 4);
      return v;
    }
    default: {
      uint64_t v;
      std::memcpy(&v, p + index * 8, 8);
      return v;
    }
  }
}

std::string FormatBits(DataType dt, uint64_t bits) {
  char out[96];
  const int digits = static_cast<int>(DataTypeSize(dt)) * 2;
  if (IsFloatType(dt)) {
    std::snprintf(out, sizeof(out), "0x%0*llx (%.17g)", digits,
                  static_cast<unsigned long long>(bits), DecodeFloat(dt, bits));
  } else if (dt == DataType::kU8) {
    std::snprintf(out, sizeof(out), "0x%02llx (%llu)", static_cast<unsigned long long>(bits),
                  static_cast<unsigned long long>(bits));
  } else {
    std::snprintf(out, sizeof(out), "0x%0*llx (%lld)", digits,
                  static_cast<unsigned long long>(bits), static_cast<long long>(Signed(dt, bits)));
  }
  return out;
}

namespace {

// Under AddressSanitizer nothing is kept: every buffer is then exactly its size, so a write
// past a guard zone is still the sanitizer's to report.
#if defined(__SANITIZE_ADDRESS__)
#define FTCCL_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FTCCL_TEST_ASAN 1
#endif
#endif

using Storage = std::unique_ptr<uint8_t, GuardedBuffer::Free>;

// Storage given back by destroyed buffers, for the next ones; a process's tests run one
// collective at a time, so a few entries are enough, and the lock is for the odd test that
// makes buffers on two threads.
struct StoragePool {
#ifdef FTCCL_TEST_ASAN
  static constexpr size_t kKeep = 0;
#else
  static constexpr size_t kKeep = 4;
#endif
  std::mutex mu;
  std::vector<std::pair<size_t, Storage>> free;
};

StoragePool& Pool() {
  static auto* pool = new StoragePool;  // never destroyed: buffers may outlive statics
  return *pool;
}

constexpr size_t kHugePage = size_t{2} << 20;

// New storage of at least `need` bytes. Outside AddressSanitizer a large one is aligned to and
// rounded up to 2 MiB and asks for transparent huge pages (madvise mode): a 64 MiB buffer then
// takes 32 page faults, not 16384. Under the sanitizer it is exactly `need` bytes.
Storage NewStorage(size_t need, size_t* capacity) {
#ifndef FTCCL_TEST_ASAN
  if (need >= kHugePage) {
    const size_t size = (need + kHugePage - 1) / kHugePage * kHugePage;
    void* p = std::aligned_alloc(kHugePage, size);
    if (p) {
      madvise(p, size, MADV_HUGEPAGE);  // a hint: without THP the buffer is still good
      *capacity = size;
      return Storage(static_cast<uint8_t*>(p));
    }
  }
#endif
  *capacity = need;
  return Storage(static_cast<uint8_t*>(std::malloc(std::max<size_t>(need, 1))));
}

Storage TakeStorage(size_t need, size_t* capacity) {
  StoragePool& pool = Pool();
  {
    std::lock_guard<std::mutex> lock(pool.mu);
    auto best = pool.free.end();
    for (auto it = pool.free.begin(); it != pool.free.end(); ++it) {
      if (it->first >= need && (best == pool.free.end() || it->first < best->first)) best = it;
    }
    if (best != pool.free.end()) {
      *capacity = best->first;
      Storage storage = std::move(best->second);
      pool.free.erase(best);
      return storage;
    }
  }
  Storage storage = NewStorage(need, capacity);
  if (!storage) throw std::bad_alloc();
  return storage;
}

void GiveStorage(size_t capacity, Storage storage) {
  if (!storage) return;
  StoragePool& pool = Pool();
  std::lock_guard<std::mutex> lock(pool.mu);
  pool.free.emplace_back(capacity, std::move(storage));
  while (pool.free.size() > StoragePool::kKeep) {
    // Keep the largest: they serve every smaller request too.
    auto smallest =
        std::min_element(pool.free.begin(), pool.free.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
    pool.free.erase(smallest);
  }
}

}  // namespace

GuardedBuffer::GuardedBuffer(size_t bytes, size_t misalign, bool fill)
    : bytes_(bytes), misalign_(misalign) {
  storage_ = TakeStorage(bytes + 2 * kGuard + misalign, &capacity_);
  std::memset(storage_.get(), kGuardByte, kGuard + misalign_);
  if (fill) std::memset(data(), kFillByte, bytes_);
  std::memset(data() + bytes_, kGuardByte, kGuard);
}

void GuardedBuffer::Free::operator()(uint8_t* p) const { std::free(p); }

GuardedBuffer::~GuardedBuffer() { GiveStorage(capacity_, std::move(storage_)); }

std::string GuardedBuffer::CheckGuards() const {
  const uint8_t* base = storage_.get();
  for (size_t i = 0; i < kGuard + misalign_; ++i) {
    if (base[i] != kGuardByte) {
      return "byte " + std::to_string(kGuard + misalign_ - i) + " before the buffer was written";
    }
  }
  const uint8_t* end = data() + bytes_;
  for (size_t i = 0; i < kGuard; ++i) {
    if (end[i] != kGuardByte) {
      return "byte " + std::to_string(i) + " after the end of the buffer was written";
    }
  }
  return "";
}

bool GuardedBuffer::Untouched() const {
  const uint8_t* p = data();
  return std::all_of(p, p + bytes_, [](uint8_t b) { return b == kFillByte; });
}

uint64_t GuardedBuffer::Digest() const {
  uint64_t h = 0xcbf29ce484222325ULL;
  const uint8_t* p = data();
  size_t i = 0;
  for (; i + 8 <= bytes_; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ULL;
    h ^= h >> 29;
  }
  for (; i < bytes_; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

}  // namespace ftccl::test
