#include "workload/check_values.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

namespace faultline::workload {
namespace {

// Input element i of rank r is a small integer drawn from a hash of (r, i), so that a misplaced
// block, a stale buffer or a missing contribution shows up. The range keeps every result exact
// in every type (integers up to 256 are exact in bf16, sums stay below 3 * ranks, products are
// powers of two): only avg of floating types needs a tolerance (one division).
uint64_t Mix(uint64_t seed, uint64_t r, uint64_t i) {
  uint64_t h = i * 0x9E3779B97F4A7C15ull + (r + 1) * 0xC2B2AE3D27D4EB4Full;
  h ^= seed * 0xD6E8FEB86659FD93ull;  // seed 0 leaves the values of earlier releases
  h ^= h >> 31;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 29;
  return h;
}

int InputValue(uint64_t seed, Coll c, RedOp op, int rank, size_t i) {
  const uint64_t h = Mix(seed, static_cast<uint64_t>(rank), i);
  if (!IsReduction(c)) return static_cast<int>(h % 128);
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg:
      return static_cast<int>(h % 4);
    case RedOp::kProd:
      return 1 + static_cast<int>(h % 2);
    case RedOp::kMin:
    case RedOp::kMax:
      return static_cast<int>(h % 64);
  }
  return 0;
}

// Reduction of element `i` of every rank's send buffer, rounded to the storage type after each
// step and divided once at the end for avg.
template <typename C>
typename C::Storage Reduced(uint64_t seed, Coll c, RedOp op, int ranks, size_t i) {
  using A = typename C::Arith;
  A acc = C::Decode(C::Encode(static_cast<A>(InputValue(seed, c, op, 0, i))));
  for (int r = 1; r < ranks; ++r) {
    A v = C::Decode(C::Encode(static_cast<A>(InputValue(seed, c, op, r, i))));
    acc = C::Decode(C::Encode(Combine(op, acc, v)));
  }
  if (op == RedOp::kAvg) acc = acc / static_cast<A>(ranks);
  return C::Encode(acc);
}

template <typename C>
bool Matches(RedOp op, bool reduction, typename C::Storage got, typename C::Storage want) {
  using A = typename C::Arith;
  const A g = C::Decode(got);
  const A w = C::Decode(want);
  if constexpr (std::is_floating_point_v<A>) {
    if (reduction && op == RedOp::kAvg) {
      // One rounding in the division and one in the conversion, whatever order a library uses.
      const double tol = std::is_same_v<C, HalfCodec>   ? 2e-3
                         : std::is_same_v<C, BF16Codec> ? 1.6e-2
                         : std::is_same_v<A, float>     ? 1e-6
                                                        : 1e-12;
      return std::fabs(static_cast<double>(g) - static_cast<double>(w)) <=
             tol * std::max(1.0, std::fabs(static_cast<double>(w)));
    }
  }
  return g == w;  // NaN (the poison of floating types) never matches
}

template <typename C>
void FillTyped(const CheckSpec& o, const SizeLayout& l, int rank, void* send) {
  using S = typename C::Storage;
  using A = typename C::Arith;
  S* out = static_cast<S*>(send);
  for (size_t i = 0; i < l.send_elems; ++i) {
    out[i] = C::Encode(static_cast<A>(InputValue(o.seed, o.coll, o.redop, rank, i)));
  }
}

// Calls fn(index, want) for every element of a receive buffer (l.recv_elems of them) with the
// value the collective must leave there on `rank`: the one statement of the expected results,
// for checking on the fly (CountWrong) and for filling a reference copy (FillExpected).
template <typename C, typename Fn>
void ForEachExpected(const CheckSpec& o, const SizeLayout& l, int rank, Fn&& fn) {
  using A = typename C::Arith;
  const int n = o.ranks;
  const size_t count = l.count;
  auto value = [&](int r, size_t i) {
    return C::Encode(static_cast<A>(InputValue(o.seed, o.coll, o.redop, r, i)));
  };
  switch (o.coll) {
    case Coll::kAllReduce:
      for (size_t i = 0; i < count; ++i) fn(i, Reduced<C>(o.seed, o.coll, o.redop, n, i));
      break;
    case Coll::kReduceScatter:
      for (size_t i = 0; i < count; ++i) {
        const size_t src = static_cast<size_t>(rank) * count + i;
        fn(i, Reduced<C>(o.seed, o.coll, o.redop, n, src));
      }
      break;
    case Coll::kAllGather:
      for (int j = 0; j < n; ++j) {
        for (size_t i = 0; i < count; ++i) fn(j * count + i, value(j, i));
      }
      break;
    case Coll::kBroadcast:
      for (size_t i = 0; i < count; ++i) fn(i, value(o.root, i));
      break;
    case Coll::kAllToAll:
      for (int j = 0; j < n; ++j) {
        for (size_t i = 0; i < count; ++i) {
          const size_t src = static_cast<size_t>(rank) * count + i;
          fn(j * count + i, value(j, src));
        }
      }
      break;
  }
}

template <typename C>
uint64_t CountWrongTyped(const CheckSpec& o, const SizeLayout& l, int rank, const void* recv) {
  using S = typename C::Storage;
  const S* in = static_cast<const S*>(recv);
  const bool red = IsReduction(o.coll);
  uint64_t wrong = 0;
  ForEachExpected<C>(o, l, rank,
                     [&](size_t i, S want) { wrong += !Matches<C>(o.redop, red, in[i], want); });
  return wrong;
}

template <typename C>
struct FillExpectedFn {
  static int Run(const CheckSpec& o, const SizeLayout& l, int rank, void* expected) {
    using S = typename C::Storage;
    S* out = static_cast<S*>(expected);
    ForEachExpected<C>(o, l, rank, [&](size_t i, S want) { out[i] = want; });
    return 0;
  }
};

template <typename C>
struct CountAgainstFn {
  static uint64_t Run(const CheckSpec& o, const SizeLayout& l, const void* expected,
                      const void* recv) {
    using S = typename C::Storage;
    const S* want = static_cast<const S*>(expected);
    const S* in = static_cast<const S*>(recv);
    const bool red = IsReduction(o.coll);
    uint64_t wrong = 0;
    for (size_t i = 0; i < l.recv_elems; ++i) wrong += !Matches<C>(o.redop, red, in[i], want[i]);
    return wrong;
  }
};

template <typename C>
struct FillFn {
  static int Run(const CheckSpec& o, const SizeLayout& l, int rank, void* send) {
    FillTyped<C>(o, l, rank, send);
    return 0;
  }
};
template <typename C>
struct CountWrongFn {
  static uint64_t Run(const CheckSpec& o, const SizeLayout& l, int rank, const void* recv) {
    return CountWrongTyped<C>(o, l, rank, recv);
  }
};

}  // namespace

void FillInput(const CheckSpec& o, const SizeLayout& l, int rank, void* send) {
  DispatchType<FillFn>(o.dtype, o, l, rank, send);
}

uint64_t CountWrong(const CheckSpec& o, const SizeLayout& l, int rank, const void* recv) {
  return DispatchType<CountWrongFn>(o.dtype, o, l, rank, recv);
}

void FillExpected(const CheckSpec& o, const SizeLayout& l, int rank, void* expected) {
  DispatchType<FillExpectedFn>(o.dtype, o, l, rank, expected);
}

uint64_t CountWrongAgainst(const CheckSpec& o, const SizeLayout& l, const void* expected,
                           const void* recv) {
  // Bit for bit the reference is a match everywhere (an expected value is never NaN): the
  // common case costs one pass over both buffers. Otherwise each element is judged as
  // CountWrong judges it (avg's tolerance, -0 == +0).
  if (std::memcmp(expected, recv, l.recv_elems * DTypeSize(o.dtype)) == 0) return 0;
  return DispatchType<CountAgainstFn>(o.dtype, o, l, expected, recv);
}

void PoisonOutput(const CheckSpec& o, const SizeLayout& l, void* recv) {
  // All ones: NaN in f32/f64/f16/bf16, and for integers a value no input combination reaches.
  std::memset(recv, 0xFF, l.recv_elems * DTypeSize(o.dtype));
}

}  // namespace faultline::workload
