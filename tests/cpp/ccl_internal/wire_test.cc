#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "crc32c.h"
#include "wire.h"

namespace ftccl {
namespace {

TEST(Crc32cTest, KnownVectors) {
  const std::string s = "123456789";
  EXPECT_EQ(Crc32c(s.data(), s.size()), 0xE3069283u);
  EXPECT_EQ(Crc32c(nullptr, 0), 0u);
  std::vector<uint8_t> zeros(32, 0);
  EXPECT_EQ(Crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);  // RFC 3720 B.4
  std::vector<uint8_t> ones(32, 0xFF);
  EXPECT_EQ(Crc32c(ones.data(), ones.size()), 0x62A8AB43u);
}

TEST(Crc32cTest, ChainsAcrossCalls) {
  std::vector<uint8_t> data(100000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 31 + 7);
  uint32_t whole = Crc32c(data.data(), data.size());
  uint32_t part = Crc32c(data.data(), 12345);
  part = Crc32c(data.data() + 12345, data.size() - 12345, part);
  EXPECT_EQ(whole, part);
}

TEST(WireTest, SealedHeaderValidatesAndEveryBitFlipIsCaught) {
  std::vector<uint8_t> payload(4096);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i);
  wire::FrameHeader h = wire::MakeHeader(wire::FrameType::kData, 0x1234);
  h.coll_seq = 7;
  h.chunk_seq = 99;
  h.offset = 8192;
  h.msg_len = 65536;
  h.length = static_cast<uint32_t>(payload.size());
  wire::Seal(&h, payload.data());
  ASSERT_TRUE(wire::HeaderValid(h));
  EXPECT_EQ(h.payload_crc, Crc32c(payload.data(), payload.size()));
  // Any single-bit flip in the header is detected.
  for (size_t byte = 0; byte < sizeof(h); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      wire::FrameHeader c = h;
      reinterpret_cast<uint8_t*>(&c)[byte] ^= static_cast<uint8_t>(1u << bit);
      EXPECT_FALSE(wire::HeaderValid(c)) << "byte " << byte << " bit " << bit;
    }
  }
  // A flipped payload byte no longer matches payload_crc.
  payload[1000] ^= 0x10;
  EXPECT_NE(Crc32c(payload.data(), payload.size()), h.payload_crc);
}

}  // namespace
}  // namespace ftccl
