#include "ftccl/ftccl_c.h"

#include <gtest/gtest.h>

#include <string>
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

}  // namespace
