// Fuzz target `frame`: the fuzzer's bytes are a peer's byte stream into a real chunk engine
// (tests/cpp/ccl_internal/fake_peer.h) that has a receive posted into a guarded buffer. It
// must never crash, write outside the buffer or hang.
//
// Input: byte 0 chooses the mode. Even: the rest is written as it is (raw garbage, torn
// frames). Odd: the rest is cut into frames, each an 80-byte header followed by the payload
// its length announces (clamped to what is left), and every frame is sealed (both CRCs fixed)
// before it is written, so that frames whose fields lie get past the integrity check.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fake_peer.h"

namespace {

using namespace std::chrono_literals;
using ftccl::testing::FakePeer;
using ftccl::testing::GuardedBuffer;

constexpr size_t kLen = 4096;

void Feed(FakePeer& peer, const uint8_t* data, size_t size) {
  if (size == 0) return;
  const bool seal = data[0] & 1;
  ++data;
  --size;
  if (!seal) {
    peer.WriteRaw(0, data, size);
    return;
  }
  while (size > 0) {
    ftccl::wire::FrameHeader h{};
    const size_t hn = std::min(size, sizeof(h));
    std::memcpy(&h, data, hn);
    data += hn;
    size -= hn;
    // The payload is what follows, up to its announced length; the length is set to what is
    // there so the frame is whole (a lie about the length alone is not a sealed lie).
    const size_t pn = std::min<size_t>(size, h.length);
    h.length = static_cast<uint32_t>(pn);
    h.magic = ftccl::wire::kMagic;
    h.version = ftccl::wire::kVersion;
    if (!peer.WriteFrame(0, h, pn ? data : nullptr)) return;
    data += pn;
    size -= pn;
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("FTCCL_LOG_LEVEL", "error", 0);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string why;
  auto peer = FakePeer::Start(1, &why);
  if (!peer) {
    std::fprintf(stderr, "frame fuzz: no engine: %s\n", why.c_str());
    std::abort();
  }
  GuardedBuffer buf(kLen, /*trap=*/true);
  ftccl::transport::Signature sig;
  sig.kind = ftccl::CollKind::kAllGather;
  sig.dtype = ftccl::DataType::kU8;
  sig.count = kLen;
  peer->engine().Begin(0, sig);
  auto recv = peer->engine().Recv(1, {0, 7}, sig, buf.data(), kLen);
  Feed(*peer, data, size);
  peer->Drain(0, 2s);
  // An orderly close: the engine lets go of the buffer before it is checked and unmapped.
  peer->Stop();
  if (!buf.Intact()) {
    std::fprintf(stderr, "frame fuzz: bytes written in front of the receive buffer\n");
    std::abort();
  }
  return 0;
}
