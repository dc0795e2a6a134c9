// conn_reset: a real TCP connection between two namespaces receives a reset; a connection
// that does not match the filter survives.
#include <unistd.h>

#include <cerrno>

#include "injector/injection.h"
#include "injector/registry.h"
#include "tests/cpp/injector/test_util.h"

namespace faultline::testing {
namespace {

TEST(ConnReset, MatchingConnectionIsResetOthersSurvive) {
  FL_SKIP_WITHOUT_NETNS(t);
  int l1 = TcpListen(t->b(), TwoHosts::kAddrB, 5400);
  int l2 = TcpListen(t->b(), TwoHosts::kAddrB, 5401);
  ASSERT_GE(l1, 0);
  ASSERT_GE(l2, 0);
  int c1 = TcpConnect(t->a(), TwoHosts::kAddrB, 5400);
  int c2 = TcpConnect(t->a(), TwoHosts::kAddrB, 5401);
  ASSERT_GE(c1, 0);
  ASSERT_GE(c2, 0);
  int s1 = ::accept(l1, nullptr, nullptr);
  int s2 = ::accept(l2, nullptr, nullptr);
  ASSERT_GE(s1, 0);
  ASSERT_GE(s2, 0);

  auto fault = CreateFault("conn_reset", {{"netns", t->a()}, {"dport", 5400}});
  ASSERT_TRUE(fault.ok()) << fault.status().ToString();
  auto inj = Injection::Arm(std::move(fault).value(), &t->journal(), t->policy());
  ASSERT_TRUE(inj.ok()) << inj.status().ToString();
  ASSERT_TRUE((*inj)->ApplyAt().ok());
  EXPECT_EQ((*inj)->apply_timing().observation.value("destroyed", 0), 1);

  // The server side (namespace B) sees the RST the kernel sent for the destroyed socket.
  timeval tv{2, 0};
  ::setsockopt(s1, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char b;
  errno = 0;
  ssize_t n = ::recv(s1, &b, 1, 0);
  EXPECT_EQ(n, -1);
  EXPECT_EQ(errno, ECONNRESET);
  // The other connection still works both ways.
  EXPECT_EQ(::send(c2, "x", 1, MSG_NOSIGNAL), 1);
  ::setsockopt(s2, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  EXPECT_EQ(::recv(s2, &b, 1, 0), 1);
  ASSERT_TRUE((*inj)->RevertAt().ok());
  for (int fd : {l1, l2, c1, c2, s1, s2}) ::close(fd);
}

}  // namespace
}  // namespace faultline::testing
