// ftccl/types.h: element sizes, names, and the half / bfloat16 conversions, checked against
// the independent reference in reference.h.
#include "ftccl/types.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <string>

#include "reference.h"

namespace ftccl::test {
namespace {

float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

uint32_t ToBits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

bool IsHalfNaN(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0; }
bool IsBF16NaN(uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x007f) != 0; }

TEST(DataTypeTest, SizesAndNames) {
  struct Row {
    DataType dt;
    size_t size;
    const char* name;
  };
  const Row rows[] = {{DataType::kF32, 4, "f32"}, {DataType::kF64, 8, "f64"},
                      {DataType::kF16, 2, "f16"}, {DataType::kBF16, 2, "bf16"},
                      {DataType::kI32, 4, "i32"}, {DataType::kI64, 8, "i64"},
                      {DataType::kU8, 1, "u8"}};
  static_assert(std::size(rows) == kNumDataTypes);
  for (const Row& r : rows) {
    EXPECT_EQ(DataTypeSize(r.dt), r.size) << r.name;
    EXPECT_STREQ(DataTypeName(r.dt), r.name);
    std::optional<DataType> parsed = ParseDataType(r.name);
    ASSERT_TRUE(parsed.has_value()) << r.name;
    EXPECT_EQ(*parsed, r.dt) << r.name;
  }
}

TEST(DataTypeTest, ParseRejectsUnknownNames) {
  for (const char* bad : {"", "f8", "f32 ", " f32", "i16", "u16", "bf", "f322", "q4"}) {
    EXPECT_FALSE(ParseDataType(bad).has_value()) << "'" << bad << "'";
  }
}

TEST(ReduceOpTest, NamesRoundTrip) {
  const std::pair<ReduceOp, const char*> rows[] = {{ReduceOp::kSum, "sum"},
                                                   {ReduceOp::kProd, "prod"},
                                                   {ReduceOp::kMin, "min"},
                                                   {ReduceOp::kMax, "max"},
                                                   {ReduceOp::kAvg, "avg"}};
  static_assert(std::size(rows) == kNumReduceOps);
  for (const auto& [op, name] : rows) {
    EXPECT_STREQ(ReduceOpName(op), name);
    std::optional<ReduceOp> parsed = ParseReduceOp(name);
    ASSERT_TRUE(parsed.has_value()) << name;
    EXPECT_EQ(*parsed, op);
  }
  for (const char* bad : {"", "add", "mean", "summ", "Sum "}) {
    EXPECT_FALSE(ParseReduceOp(bad).has_value()) << "'" << bad << "'";
  }
}

TEST(CollKindTest, NamesRoundTrip) {
  const std::pair<CollKind, const char*> rows[] = {{CollKind::kAllReduce, "allreduce"},
                                                   {CollKind::kAllGather, "allgather"},
                                                   {CollKind::kReduceScatter, "reducescatter"},
                                                   {CollKind::kBroadcast, "broadcast"},
                                                   {CollKind::kReduce, "reduce"},
                                                   {CollKind::kAllToAll, "alltoall"},
                                                   {CollKind::kBarrier, "barrier"}};
  std::set<std::string> names;
  for (const auto& [kind, name] : rows) {
    EXPECT_STREQ(CollKindName(kind), name);
    names.insert(CollKindName(kind));
    std::optional<CollKind> parsed = ParseCollKind(name);
    ASSERT_TRUE(parsed.has_value()) << name;
    EXPECT_EQ(*parsed, kind);
  }
  EXPECT_EQ(names.size(), std::size(rows));
  for (const char* bad : {"", "gather", "scatter", "allreduce2", "all-reduce"}) {
    EXPECT_FALSE(ParseCollKind(bad).has_value()) << "'" << bad << "'";
  }
}

// --- binary16 --------------------------------------------------------------------------------

// Every half value converts to float exactly.
TEST(HalfTest, HalfToFloatIsExactForEveryValue) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    const float got = HalfToFloat(bits);
    if (IsHalfNaN(bits)) {
      EXPECT_TRUE(std::isnan(got)) << std::hex << h;
      continue;
    }
    const double want = Decode16(bits, Half16::kF16);
    ASSERT_EQ(static_cast<double>(got), want) << "half 0x" << std::hex << h;
    ASSERT_EQ(std::signbit(got), std::signbit(want)) << "half 0x" << std::hex << h;
  }
}

// Every non-NaN half survives float and back unchanged (incl. -0, subnormals, infinities).
TEST(HalfTest, RoundTripsEveryValue) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    if (IsHalfNaN(bits)) continue;
    ASSERT_EQ(FloatToHalf(HalfToFloat(bits)), bits) << "half 0x" << std::hex << h;
  }
}

TEST(HalfTest, KnownValues) {
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);  // largest finite
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
}

TEST(HalfTest, RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1).
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9: up to even.
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  // Just above the halfway point rounds up.
  EXPECT_EQ(FloatToHalf(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)), 0x3c01);
  // 65520 is halfway between 65504 and 65536 (2^16, out of range): rounds to infinity.
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);
  EXPECT_EQ(FloatToHalf(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(FloatToHalf(1e10f), 0x7c00);
  EXPECT_EQ(FloatToHalf(-1e10f), 0xfc00);
  // Half the smallest subnormal ties to 0; a bit more rounds to the smallest subnormal.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(FloatToHalf(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(FloatToHalf(-std::ldexp(1.0f, -30)), 0x8000);
  // 1.5 * 2^-24 ties between subnormals 1 and 2: to even (2).
  EXPECT_EQ(FloatToHalf(1.5f * std::ldexp(1.0f, -24)), 0x0002);
}

TEST(HalfTest, NaNStaysNaN) {
  const uint32_t nans[] = {0x7fc00000, 0xffc00000, 0x7f800001, 0x7fa00000, 0x7f802000, 0xff800001};
  for (uint32_t bits : nans) {
    EXPECT_TRUE(IsHalfNaN(FloatToHalf(FromBits(bits)))) << std::hex << bits;
  }
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7e00)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7c01)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0xfc01)));
}

// Floats spread over the whole range (every exponent, several mantissas, both signs) round
// like the reference.
TEST(HalfTest, MatchesReferenceAcrossTheRange) {
  uint64_t checked = 0;
  for (uint32_t exp = 0; exp < 255; ++exp) {
    for (uint32_t m = 0; m < (1u << 23); m += 4099) {
      for (uint32_t low : {0u, 0xfffu, 0x1000u, 0x1001u, 0x2000u, 0x3000u}) {
        for (uint32_t sign : {0u, 0x80000000u}) {
          const uint32_t bits = sign | (exp << 23) | ((m | low) & 0x7fffff);
          const float f = FromBits(bits);
          const uint16_t want = Encode16(f, Half16::kF16);
          ASSERT_EQ(FloatToHalf(f), want) << "float 0x" << std::hex << bits << " = " << f;
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 1000000u);
}

// --- bfloat16 --------------------------------------------------------------------------------

TEST(BF16Test, BF16ToFloatIsTheUpperHalfOfTheFloat) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const float got = BF16ToFloat(bits);
    if (IsBF16NaN(bits)) {
      EXPECT_TRUE(std::isnan(got)) << std::hex << b;
      continue;
    }
    ASSERT_EQ(ToBits(got), b << 16) << "bf16 0x" << std::hex << b;
    ASSERT_EQ(FloatToBF16(got), bits) << "bf16 0x" << std::hex << b;
  }
}

TEST(BF16Test, RoundsToNearestEven) {
  EXPECT_EQ(FloatToBF16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBF16(-0.0f), 0x8000);
  // 0x3f808000 is halfway between 0x3f80 (even) and 0x3f81: stays.
  EXPECT_EQ(FloatToBF16(FromBits(0x3f808000)), 0x3f80);
  // 0x3f818000 is halfway between 0x3f81 (odd) and 0x3f82: up to even.
  EXPECT_EQ(FloatToBF16(FromBits(0x3f818000)), 0x3f82);
  EXPECT_EQ(FloatToBF16(FromBits(0x3f808001)), 0x3f81);
  EXPECT_EQ(FloatToBF16(FromBits(0x3f807fff)), 0x3f80);
  // The largest float rounds up past the largest bf16: infinity.
  EXPECT_EQ(FloatToBF16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(FloatToBF16(-std::numeric_limits<float>::max()), 0xff80);
  EXPECT_EQ(FloatToBF16(FromBits(0x7f7f7fff)), 0x7f7f);
  EXPECT_EQ(FloatToBF16(std::numeric_limits<float>::infinity()), 0x7f80);
  // Subnormals round like everything else.
  EXPECT_EQ(FloatToBF16(FromBits(0x00008000)), 0x0000);
  EXPECT_EQ(FloatToBF16(FromBits(0x00018000)), 0x0002);
  EXPECT_EQ(FloatToBF16(FromBits(0x00008001)), 0x0001);
}

TEST(BF16Test, NaNStaysNaN) {
  // A NaN whose payload lives only in the low 16 bits must not turn into infinity.
  const uint32_t nans[] = {0x7fc00000, 0xffc00000, 0x7f800001, 0x7f80ffff, 0xff800001, 0x7fffffff};
  for (uint32_t bits : nans) {
    EXPECT_TRUE(IsBF16NaN(FloatToBF16(FromBits(bits)))) << std::hex << bits;
  }
  EXPECT_TRUE(std::isnan(BF16ToFloat(0x7fc0)));
  EXPECT_TRUE(std::isnan(BF16ToFloat(0x7f81)));
}

TEST(BF16Test, MatchesReferenceAcrossTheRange) {
  for (uint32_t exp = 0; exp < 255; ++exp) {
    for (uint32_t m = 0; m < (1u << 23); m += 1021) {
      for (uint32_t sign : {0u, 0x80000000u}) {
        const uint32_t bits = sign | (exp << 23) | m;
        const float f = FromBits(bits);
        ASSERT_EQ(FloatToBF16(f), Encode16(f, Half16::kBF16))
            << "float 0x" << std::hex << bits << " = " << f;
      }
    }
  }
}

// --- the reference itself, on values whose encoding is known --------------------------------

TEST(ReferenceTest, KnownEncodings) {
  EXPECT_EQ(Encode16(1.0, Half16::kF16), 0x3c00);
  EXPECT_EQ(Encode16(65504.0, Half16::kF16), 0x7bff);
  EXPECT_EQ(Encode16(std::ldexp(1.0, -24), Half16::kF16), 0x0001);
  EXPECT_EQ(Encode16(-0.0, Half16::kF16), 0x8000);
  EXPECT_EQ(Encode16(1.0, Half16::kBF16), 0x3f80);
  EXPECT_EQ(Encode16(-3.0, Half16::kBF16), 0xc040);
  EXPECT_EQ(Encode16(std::ldexp(1.0, -133), Half16::kBF16), 0x0001);
  EXPECT_EQ(Decode16(0x7bff, Half16::kF16), 65504.0);
  EXPECT_EQ(Decode16(0x0001, Half16::kF16), std::ldexp(1.0, -24));
  EXPECT_EQ(Decode16(0x3f80, Half16::kBF16), 1.0);
  EXPECT_EQ(RoundTo16(1.0 + std::ldexp(1.0, -11), Half16::kF16), 1.0);
  EXPECT_TRUE(std::isinf(RoundTo16(65520.0, Half16::kF16)));
}

// The fast exact encoder used for inputs agrees with the general one on every exact value.
TEST(ReferenceTest, ExactEncoderAgrees) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    for (Half16 format : {Half16::kF16, Half16::kBF16}) {
      const double v = Decode16(bits, format);
      if (std::isnan(v)) continue;
      ASSERT_EQ(Encode16Exact(static_cast<float>(v), format), bits) << std::hex << h;
      ASSERT_EQ(Encode16(v, format), bits) << std::hex << h;
    }
  }
}

}  // namespace
}  // namespace ftccl::test
