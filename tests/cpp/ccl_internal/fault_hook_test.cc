// The fault-hook server on its own, over a real Unix socket, with a recording target in place
// of a transport: the protocol's ops, every kind of bad request, and the socket's life cycle.
#include "fault_hook.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fake_peer.h"
#include "hook_call.h"

namespace ftccl {
namespace {

using json = nlohmann::json;
using test::HookExchange;

// Records what the server asked; answers like a TCP transport would.
class RecordingTarget final : public transport::FaultTarget {
 public:
  const char* TransportName() const override { return "tcp"; }
  Result<transport::PathFaultState> QueryPath(int peer, int rail, Deadline) override {
    last_peer = peer;
    last_rail = rail;
    if (busy) return Timeout("progress thread busy");
    transport::PathFaultState s;
    s.corrupt_frames_sent = sent.load();
    s.applied_ns = applied_ns;
    return s;
  }
  Result<transport::PathFaultState> CorruptNextFrame(int peer, int rail, transport::FramePart part,
                                                     Deadline d) override {
    last_part = part;
    if (busy) {  // armed, no data frame yet; and then no query is answered in time
      transport::PathFaultState s;
      s.corrupt_frames_sent = sent.load();
      s.corrupt_pending = true;
      return s;
    }
    ++sent;  // as if a data frame carried it at once
    applied_ns = 12345;
    return QueryPath(peer, rail, d);
  }
  std::atomic<bool> busy{false};
  std::atomic<uint64_t> sent{0};
  int64_t applied_ns = 0;
  int last_peer = -1, last_rail = -1;
  transport::FramePart last_part = transport::FramePart::kPayload;
};

std::string TempPath(const std::string& name) {
  return "/tmp/ftccl-hook-" + std::to_string(getpid()) + "-" + name;
}

class FaultHookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = TempPath("unit.sock");
    auto s = FaultHookServer::Open(path_);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s.value());
    // rank 1 of 3 ranks over 2 rails
    ASSERT_TRUE(server_->Start(&target_, 1, 3, 2).ok());
  }
  // Sends `bytes`, with a '\n' added unless they end in one.
  json Call(std::string bytes) {
    if (bytes.empty() || bytes.back() != '\n') bytes += '\n';
    std::string line = HookExchange(path_, bytes);
    json j = json::parse(line, nullptr, false);
    EXPECT_TRUE(j.is_object()) << "response '" << line << "' to '" << bytes << "'";
    return j.is_object() ? j : json::object();
  }
  // A request that must be refused: ok=false, v=1 and an error text containing `words`.
  void ExpectRefused(const std::string& bytes, const std::string& words) {
    json r = Call(bytes);
    EXPECT_EQ(r.value("ok", true), false) << r.dump() << " for " << bytes;
    EXPECT_EQ(r.value("v", 0), 1) << r.dump();
    EXPECT_NE(r.value("error", std::string()).find(words), std::string::npos)
        << "error of '" << bytes << "' should mention '" << words << "': " << r.dump();
  }

  std::string path_;
  RecordingTarget target_;
  std::unique_ptr<FaultHookServer> server_;
};

TEST_F(FaultHookTest, PingNamesRankAndTransport) {
  json r = Call(R"({"v":1,"op":"ping","id":"p1"})");
  EXPECT_EQ(r, json({{"v", 1}, {"id", "p1"}, {"ok", true}, {"rank", 1}, {"transport", "tcp"}}));
}

TEST_F(FaultHookTest, SocketIsPrivateAndRemovedOnDestroy) {
  struct stat st {};
  ASSERT_EQ(lstat(path_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  server_.reset();
  EXPECT_NE(lstat(path_.c_str(), &st), 0) << path_ << " is still there";
  EXPECT_EQ(HookExchange(path_, "{}\n").rfind("<connect failed", 0), 0u);
}

TEST_F(FaultHookTest, ConnCorruptReachesTheTargetAndQuerySeesIt) {
  json q0 = Call(R"({"v":1,"op":"query","peer":2,"path":1})");
  EXPECT_EQ(q0.value("ok", false), true) << q0.dump();
  EXPECT_EQ(q0.value("corrupt_frames_sent", -1), 0);
  json r = Call(R"({"v":1,"op":"conn_corrupt","peer":2,"path":1,"id":"c"})");
  EXPECT_EQ(r.value("ok", false), true) << r.dump();
  EXPECT_EQ(r.value("corrupt_frames_sent", -1), 1);
  EXPECT_EQ(r.value("applied_ns", int64_t{0}), 12345);
  EXPECT_EQ(r.value("pending", true), false);
  EXPECT_EQ(r.value("id", ""), "c");
  EXPECT_EQ(target_.last_peer, 2);
  EXPECT_EQ(target_.last_rail, 1);
  EXPECT_EQ(target_.last_part, transport::FramePart::kPayload);
  Call(R"({"v":1,"op":"conn_corrupt","peer":0,"path":0,"part":"header"})");
  EXPECT_EQ(target_.last_part, transport::FramePart::kHeader);
  json q1 = Call(R"({"v":1,"op":"query","peer":0,"path":0})");
  EXPECT_EQ(q1.value("corrupt_frames_sent", -1), 2) << q1.dump();
}

// The damage is armed once CorruptNextFrame answered: queries that a busy transport does not
// answer while the hook waits for a data frame leave the answer "armed, pending", not a
// failure (which would tell the injector that nothing was applied).
TEST_F(FaultHookTest, ConnCorruptArmedButUnconfirmedIsPendingNotRefused) {
  target_.busy = true;
  json r = Call(R"({"v":1,"op":"conn_corrupt","peer":2,"path":0,"part":"header"})");
  EXPECT_EQ(r.value("ok", false), true) << r.dump();
  EXPECT_EQ(r.value("pending", false), true) << r.dump();
  EXPECT_EQ(r.value("corrupt_frames_sent", -1), 0) << r.dump();
  EXPECT_EQ(target_.last_part, transport::FramePart::kHeader);
}

TEST_F(FaultHookTest, QpErrorIsUnsupportedOnTcp) {
  json r = Call(R"({"v":1,"op":"qp_error","peer":0,"path":1,"id":"q"})");
  EXPECT_EQ(r, json({{"v", 1}, {"id", "q"}, {"ok", false}, {"error", "unsupported"}}));
}

TEST_F(FaultHookTest, BadRequestsAreRefusedWithAReason) {
  ExpectRefused("hello\n", "not one JSON object");
  ExpectRefused("[1,2]\n", "not one JSON object");
  ExpectRefused("{\"v\":1,\"op\":\"ping\"\n", "not one JSON object");
  ExpectRefused(R"({"op":"ping"})", "version");
  ExpectRefused(R"({"v":2,"op":"ping"})", "version");
  ExpectRefused(R"({"v":1})", "missing 'op'");
  ExpectRefused(R"({"v":1,"op":"reboot"})", "unknown op 'reboot'");
  ExpectRefused(R"({"v":1,"op":"ping","id":7})", "'id' must be a string");
  ExpectRefused(R"({"v":1,"op":"query","path":0})", "missing 'peer'");
  ExpectRefused(R"({"v":1,"op":"query","peer":0})", "missing 'path'");
  ExpectRefused(R"({"v":1,"op":"query","peer":"0","path":0})", "must be an integer");
  ExpectRefused(R"({"v":1,"op":"query","peer":-1,"path":0})", "out of range");
  ExpectRefused(R"({"v":1,"op":"conn_corrupt","peer":3,"path":0})", "no connection to peer 3");
  ExpectRefused(R"({"v":1,"op":"conn_corrupt","peer":1,"path":0})", "no connection to peer 1");
  ExpectRefused(R"({"v":1,"op":"conn_corrupt","peer":0,"path":2})", "path 2 does not exist");
  ExpectRefused(R"({"v":1,"op":"conn_corrupt","peer":0,"path":0,"part":"tail"})", "'part'");
  ExpectRefused("\xff\xfe{\n", "not one JSON object");
  EXPECT_EQ(target_.sent.load(), 0u) << "a refused request reached the transport";
}

TEST_F(FaultHookTest, OverlongLineIsRefused) {
  std::string big = R"({"v":1,"op":"ping","id":")" + std::string(5000, 'x') + "\"}\n";
  ExpectRefused(big, "longer than 4096");
  // Exactly at the limit (4095 bytes and the newline) is still served.
  std::string head = R"({"v":1,"op":"ping","id":")";
  std::string fit = head + std::string(4096 - 1 - head.size() - 2, 'y') + "\"}";
  ASSERT_EQ(fit.size(), 4095u);
  EXPECT_EQ(Call(fit + "\n").value("ok", false), true);
}

TEST_F(FaultHookTest, SlowClientIsAnsweredAndDoesNotBlockOthers) {
  // A client that connects and says nothing.
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, path_.data(), path_.size());
  int slow = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_EQ(connect(slow, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  ASSERT_EQ(send(slow, "{\"v\":1,", 7, 0), 7);
  // Another client is served meanwhile, well before the slow one's time runs out.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(Call(R"({"v":1,"op":"ping"})").value("ok", false), true);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
  // The slow one gets an answer after the client timeout, then the server closes.
  std::string reply;
  char buf[512];
  ssize_t n;
  while ((n = recv(slow, buf, sizeof(buf), 0)) > 0) reply.append(buf, static_cast<size_t>(n));
  close(slow);
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, std::chrono::milliseconds(900));
  EXPECT_LT(waited, std::chrono::milliseconds(3000));
  EXPECT_NE(reply.find("no complete request line"), std::string::npos) << reply;
  // A client that leaves mid-line leaves the server serving.
  int gone = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_EQ(connect(gone, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  ASSERT_EQ(send(gone, "{\"v\"", 4, 0), 4);
  close(gone);
  EXPECT_EQ(Call(R"({"v":1,"op":"ping"})").value("ok", false), true);
}

TEST_F(FaultHookTest, ManySilentClientsDelayButDoNotStopService) {
  // More silent clients than are served at once: the rest wait in the backlog until the
  // first ones time out, and a real request is still answered within the client's patience.
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, path_.data(), path_.size());
  std::vector<int> silent;
  for (size_t i = 0; i < FaultHookServer::kMaxClients + 4; ++i) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
    silent.push_back(fd);
  }
  json r = Call(R"({"v":1,"op":"ping"})");
  EXPECT_EQ(r.value("ok", false), true) << r.dump();
  for (int fd : silent) close(fd);
  EXPECT_EQ(Call(R"({"v":1,"op":"ping"})").value("ok", false), true);
}

TEST(FaultHookOpenTest, UnusablePathsFailClearly) {
  auto too_long = FaultHookServer::Open("/tmp/" + std::string(120, 'a'));
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.status().code(), Code::kInvalidArgument);
  EXPECT_NE(too_long.status().message().find("at most 107"), std::string::npos)
      << too_long.status().ToString();

  auto no_dir = FaultHookServer::Open("/nonexistent-dir-ftccl/rank0.hook");
  ASSERT_FALSE(no_dir.ok());
  EXPECT_NE(no_dir.status().message().find("/nonexistent-dir-ftccl/rank0.hook"), std::string::npos)
      << no_dir.status().ToString();

  const std::string file = TempPath("plain-file");
  std::ofstream(file) << "not a socket";
  auto not_sock = FaultHookServer::Open(file);
  ASSERT_FALSE(not_sock.ok());
  EXPECT_NE(not_sock.status().message().find("not a socket"), std::string::npos);
  std::remove(file.c_str());

  EXPECT_FALSE(FaultHookServer::Open("").ok());
}

TEST(FaultHookOpenTest, StaleSocketIsReplacedButALiveOneIsNotTakenOver) {
  const std::string path = TempPath("stale.sock");
  // A socket file nobody serves (its process went away).
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, path.data(), path.size());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  close(fd);
  auto first = FaultHookServer::Open(path);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = FaultHookServer::Open(path);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("another process serves"), std::string::npos)
      << second.status().ToString();
  first.value().reset();
  struct stat st {};
  EXPECT_NE(lstat(path.c_str(), &st), 0);
}

// The engine's side of a timed-out command: one whose caller stopped waiting (its deadline had
// passed before the progress thread took it up) arms nothing when the progress thread gets to
// it, so a fault answered as refused is never applied later. The deadline is already past when
// the command is posted; the progress thread can still answer first, in the moment between the
// post and the wait (the command is then armed and answered ok), so that case tries again on a
// fresh engine. (Under TSan in CI the progress thread once answered all of 5 tries first: 20.)
TEST(EngineHookTest, ACommandWhoseCallerTimedOutArmsNothing) {
  using std::chrono::steady_clock;
  for (int attempt = 0; attempt < 20; ++attempt) {
    std::string why;
    auto peer = testing::FakePeer::Start(1, &why);
    ASSERT_NE(peer, nullptr) << why;
    auto& engine = peer->engine();
    auto armed = engine.CorruptNextFrame(1, 0, transport::FramePart::kPayload,
                                         steady_clock::now() - std::chrono::milliseconds(1));
    if (armed.ok()) continue;
    EXPECT_EQ(armed.status().code(), Code::kTimeout) << armed.status().ToString();
    // Commands run in order: by the time this one is answered, the abandoned one has run.
    auto q = engine.QueryPath(1, 0, steady_clock::now() + std::chrono::seconds(5));
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    EXPECT_FALSE(q->corrupt_pending) << "a command answered as timed out armed the fault";
    EXPECT_EQ(q->corrupt_frames_sent.value_or(0), 0u);
    return;
  }
  FAIL() << "the progress thread answered every one of 20 commands posted past their deadline";
}

}  // namespace
}  // namespace ftccl
