// ftccl/status.h: codes, messages, context, errno conversion, Result<T> and the return macro.
#include "ftccl/status.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <set>
#include <string>

namespace ftccl::test {
namespace {

const Code kErrorCodes[] = {Code::kInvalidArgument, Code::kTimeout,  Code::kNetwork,
                            Code::kPeerLost,        Code::kMismatch, Code::kCorrupt,
                            Code::kAborted,         Code::kInternal};

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), Code::kOk);
  EXPECT_TRUE(s.message().empty());
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_TRUE(Status::Ok().ok());
}

TEST(StatusTest, CodeNamesAreDistinct) {
  std::set<std::string> names;
  names.insert(CodeName(Code::kOk));
  for (Code c : kErrorCodes) {
    ASSERT_NE(CodeName(c), nullptr);
    EXPECT_FALSE(std::string(CodeName(c)).empty());
    names.insert(CodeName(c));
  }
  EXPECT_EQ(names.size(), std::size(kErrorCodes) + 1);
}

TEST(StatusTest, ToStringIsCodeAndMessage) {
  for (Code c : kErrorCodes) {
    Status s(c, "rank 3 went away");
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(s.code(), c);
    EXPECT_EQ(s.message(), "rank 3 went away");
    EXPECT_EQ(s.ToString(), std::string(CodeName(c)) + ": rank 3 went away");
  }
}

TEST(StatusTest, Constructors) {
  EXPECT_EQ(InvalidArgument("x").code(), Code::kInvalidArgument);
  EXPECT_EQ(Timeout("x").code(), Code::kTimeout);
  EXPECT_EQ(NetworkError("x").code(), Code::kNetwork);
  EXPECT_EQ(PeerLost("x").code(), Code::kPeerLost);
  EXPECT_EQ(Mismatch("x").code(), Code::kMismatch);
  EXPECT_EQ(Corrupt("x").code(), Code::kCorrupt);
  EXPECT_EQ(Aborted("x").code(), Code::kAborted);
  EXPECT_EQ(Internal("x").code(), Code::kInternal);
  EXPECT_EQ(Timeout("after 5 s").message(), "after 5 s");
}

TEST(StatusTest, WithContext) {
  EXPECT_TRUE(Status::Ok().WithContext("allreduce").ok());
  EXPECT_EQ(Status::Ok().WithContext("allreduce").ToString(), "OK");
  Status s = PeerLost("rank 2 closed the connection").WithContext("allreduce #7");
  EXPECT_EQ(s.code(), Code::kPeerLost);
  const size_t context = s.message().find("allreduce #7");
  const size_t original = s.message().find("rank 2 closed the connection");
  ASSERT_NE(context, std::string::npos) << s.message();
  ASSERT_NE(original, std::string::npos) << s.message();
  EXPECT_LT(context, original) << "context is a prefix: " << s.message();
}

TEST(StatusTest, CopiesAreIndependent) {
  Status a = Corrupt("crc mismatch");
  Status b = a;
  b = b.WithContext("rail 1");
  EXPECT_EQ(a.message(), "crc mismatch");
  EXPECT_EQ(b.code(), Code::kCorrupt);
}

TEST(StatusTest, ErrnoStatus) {
  for (int err : {ECONNREFUSED, ETIMEDOUT, EADDRNOTAVAIL, ENOMEM, EINVAL}) {
    Status s = ErrnoStatus("connect 127.0.0.1:1", err);
    EXPECT_FALSE(s.ok()) << err;
    EXPECT_NE(s.message().find("connect 127.0.0.1:1"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(std::strerror(err)), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("(errno " + std::to_string(err) + ")"), std::string::npos)
        << s.message();
  }
}

TEST(ResultTest, HoldsValueOrStatus) {
  Result<int> good(42);
  EXPECT_TRUE(good.ok());
  EXPECT_TRUE(good.status().ok());
  EXPECT_EQ(good.value(), 42);
  EXPECT_EQ(*good, 42);

  Result<int> bad(Timeout("bootstrap"));
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kTimeout);
  EXPECT_EQ(bad.status().message(), "bootstrap");
}

TEST(ResultTest, MoveOnlyValue) {
  Result<std::unique_ptr<std::string>> r(std::make_unique<std::string>("comm"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->get()->size(), 4u);
  std::unique_ptr<std::string> taken = std::move(r).value();
  ASSERT_NE(taken, nullptr);
  EXPECT_EQ(*taken, "comm");
}

Status FailsAt(int step, int* reached) {
  for (int i = 0; i < 3; ++i) {
    *reached = i;
    FTCCL_RETURN_IF_ERROR(i == step ? Aborted("step " + std::to_string(i)) : Status::Ok());
  }
  return Status::Ok();
}

TEST(StatusTest, ReturnIfErrorStopsAtTheFirstError) {
  int reached = -1;
  Status s = FailsAt(1, &reached);
  EXPECT_EQ(reached, 1);
  EXPECT_EQ(s.code(), Code::kAborted);
  EXPECT_EQ(s.message(), "step 1");
  EXPECT_TRUE(FailsAt(-1, &reached).ok());
  EXPECT_EQ(reached, 2);
}

}  // namespace
}  // namespace ftccl::test
