#include "ftccl/ftccl_c.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

namespace {

TEST(CApiTest, SingleRankCollectivesAndErrors) {
  const char* rails[] = {"127.0.0.1"};
  ftcclComm_t comm = nullptr;
  ASSERT_EQ(ftcclCommInit(&comm, 0, 1, "", rails, 1, 5000), ftcclSuccess) << ftcclLastError();
  std::vector<float> in = {1, 2, 3}, out(3);
  EXPECT_EQ(ftcclAllReduce(comm, in.data(), out.data(), 3, ftcclF32, ftcclSum, 0), ftcclSuccess);
  EXPECT_EQ(out, in);
  EXPECT_EQ(ftcclBarrier(comm, 1000), ftcclSuccess);
  // A bad root is reported, with a message.
  EXPECT_EQ(ftcclBroadcast(comm, in.data(), out.data(), 3, ftcclF32, 5, 0), ftcclInvalidArgument);
  EXPECT_NE(std::string(ftcclLastError()).find("root"), std::string::npos) << ftcclLastError();
  ftcclCommDestroy(comm);

  EXPECT_EQ(ftcclBarrier(nullptr, 0), ftcclInvalidArgument);
  EXPECT_EQ(ftcclCommInit(&comm, 3, 2, "127.0.0.1:1", rails, 1, 1000), ftcclInvalidArgument);
  EXPECT_EQ(comm, nullptr);
  EXPECT_STREQ(ftcclResultString(ftcclPeerLost), "PEER_LOST");
}

// Revoke and Shrink through the C API: three ranks (threads of this process over loopback);
// rank 2 revokes and leaves, the other two shrink without it and reduce exactly in the new
// group; a revoked communicator fails its calls with ftcclAborted, bad lists are refused.
TEST(CApiTest, RevokeAndShrinkWithoutALeavingRank) {
  const char* rails[] = {"127.0.0.1"};
  constexpr int kSize = 3;
  // A free port for the bootstrap: the kernel's choice of an ephemeral one is not reused at once.
  const std::string bootstrap = "127.0.0.1:" + std::to_string(29600 + (getpid() % 2000));
  ftcclComm_t comms[kSize] = {};
  ftcclResult init[kSize];
  {
    std::vector<std::thread> ts;
    for (int r = 0; r < kSize; ++r) {
      ts.emplace_back([&, r] { init[r] = ftcclCommInit(&comms[r], r, kSize, bootstrap.c_str(), rails, 1, 10000); });
    }
    for (auto& t : ts) t.join();
  }
  for (int r = 0; r < kSize; ++r) ASSERT_EQ(init[r], ftcclSuccess) << r;
  EXPECT_EQ(ftcclCommRank(comms[1]), 1);
  EXPECT_EQ(ftcclCommSize(comms[1]), kSize);
  EXPECT_EQ(ftcclCommLostPeer(comms[1]), -1);
  // This rank itself is not a rank to leave out.
  ftcclComm_t bad = reinterpret_cast<ftcclComm_t>(1);
  const int self[] = {0};
  EXPECT_EQ(ftcclCommShrink(comms[0], self, 1, 1000, &bad), ftcclInvalidArgument);
  EXPECT_EQ(bad, nullptr);
  EXPECT_EQ(ftcclCommShrink(comms[0], nullptr, 1, 1000, &bad), ftcclInvalidArgument);

  ASSERT_EQ(ftcclCommRevoke(comms[2], "rank 2 leaves"), ftcclSuccess);
  float one = 1, out = 0;
  EXPECT_EQ(ftcclAllReduce(comms[2], &one, &out, 1, ftcclF32, ftcclSum, 1000), ftcclAborted);
  EXPECT_NE(std::string(ftcclLastError()).find("revoked"), std::string::npos) << ftcclLastError();

  ftcclComm_t shrunk[2] = {};
  ftcclResult res[2];
  {
    const int gone[] = {2};
    std::vector<std::thread> ts;
    for (int r = 0; r < 2; ++r) {
      ts.emplace_back([&, r] { res[r] = ftcclCommShrink(comms[r], gone, 1, 10000, &shrunk[r]); });
    }
    for (auto& t : ts) t.join();
  }
  for (int r = 0; r < 2; ++r) ASSERT_EQ(res[r], ftcclSuccess) << r << ": " << ftcclLastError();
  EXPECT_EQ(ftcclCommSize(shrunk[0]), 2);
  EXPECT_EQ(ftcclCommRank(shrunk[1]), 1);
  float sums[2] = {};
  {
    std::vector<std::thread> ts;
    for (int r = 0; r < 2; ++r) {
      ts.emplace_back([&, r] {
        const float v = static_cast<float>(r + 1);
        res[r] = ftcclAllReduce(shrunk[r], &v, &sums[r], 1, ftcclF32, ftcclSum, 10000);
      });
    }
    for (auto& t : ts) t.join();
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(res[r], ftcclSuccess) << r;
    EXPECT_EQ(sums[r], 3.0f) << r;
  }
  // The parents stay revoked.
  EXPECT_EQ(ftcclBarrier(comms[0], 1000), ftcclAborted);
  for (ftcclComm_t c : shrunk) ftcclCommDestroy(c);
  for (ftcclComm_t c : comms) ftcclCommDestroy(c);
}

}  // namespace
