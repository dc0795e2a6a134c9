// The fault-hook client: a clear error when nothing listens, and the wire protocol against a
// minimal rank-side server that keeps real per-connection state.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>

#include "injector/hook_client.h"
#include "injector/injection.h"
#include "injector/registry.h"
#include "tests/cpp/injector/test_util.h"

namespace faultline::testing {
namespace {

// Serves the protocol on `path` until stopped: one QP state and one corrupt-frame counter.
class FakeRank {
 public:
  explicit FakeRank(std::string path) : path_(std::move(path)) {
    ::unlink(path_.c_str());
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::strncpy(sa.sun_path, path_.c_str(), sizeof(sa.sun_path) - 1);
    ok_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0 && ::listen(fd_, 8) == 0;
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeRank() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  bool ok() const { return ok_; }
  std::string last_request() const { return last_; }

 private:
  void Serve() {
    while (!stop_) {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::string line;
      char ch;
      while (::recv(c, &ch, 1, 0) == 1 && ch != '\n') line.push_back(ch);
      last_ = line;
      auto req = nlohmann::json::parse(line, nullptr, false);
      nlohmann::json resp = {{"v", 1}, {"ok", true}};
      std::string op = req.is_object() ? req.value("op", "") : "";
      if (!req.is_object() || req.value("v", 0) != 1) {
        resp = {{"v", 1}, {"ok", false}, {"error", "bad request"}};
      } else if (op == "ping") {
        resp["rank"] = 3;
        resp["transport"] = "verbs";
      } else if (op == "qp_error") {
        qp_state_ = "ERR";
        resp["qp_state"] = qp_state_;
        resp["applied_ns"] = MonoNow();
      } else if (op == "conn_corrupt") {
        ++corrupt_;
        resp["corrupt_frames_sent"] = corrupt_;
      } else if (op == "query") {
        resp["qp_state"] = qp_state_;
        resp["corrupt_frames_sent"] = corrupt_;
      } else {
        resp = {{"v", 1}, {"ok", false}, {"error", "unsupported"}};
      }
      std::string out = resp.dump() + "\n";
      (void)::send(c, out.data(), out.size(), MSG_NOSIGNAL);
      ::close(c);
    }
  }
  std::string path_;
  int fd_ = -1;
  bool ok_ = false;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::string last_;
  std::string qp_state_ = "RTS";
  int corrupt_ = 0;
};

std::string TempPath(const char* tag) {
  return "/tmp/fl-hook-" + std::to_string(::getpid()) + "-" + tag + ".sock";
}

TEST(FaultHook, NothingListeningIsAClearError) {
  auto r = HookCall(TempPath("none"), {{"op", "ping"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find("nothing listens at fault hook path"), std::string::npos)
      << r.status().message();
}

TEST(FaultHook, QpErrorMovesTheQpToErrAndIsObserved) {
  FakeRank rank(TempPath("qp"));
  ASSERT_TRUE(rank.ok());
  auto fault = CreateFault("qp_error", {{"hook", TempPath("qp")}, {"peer", 1}, {"path", 0}});
  ASSERT_TRUE(fault.ok()) << fault.status().ToString();
  char dir[] = "/tmp/fl-journal-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  auto journal = Journal::Open(dir);
  ASSERT_TRUE(journal.ok());
  auto policy = TargetPolicy::Create({}, nullptr, false);
  {
    auto inj = Injection::Arm(std::move(fault).value(), journal->get(), *policy);
    ASSERT_TRUE(inj.ok()) << inj.status().ToString();
    ASSERT_TRUE((*inj)->ApplyAt().ok());
    EXPECT_EQ((*inj)->apply_timing().observation.value("qp_state", ""), "ERR");
    ASSERT_TRUE((*inj)->RevertAt().ok());
  }
  auto last = nlohmann::json::parse(rank.last_request());
  EXPECT_EQ(last.value("op", ""), "query");
  EXPECT_EQ(last.value("peer", -1), 1);
  Sh(std::string("rm -rf ") + dir);
}

TEST(FaultHook, ConnCorruptIsCountedAndRefusalsSurface) {
  FakeRank rank(TempPath("tcp"));
  ASSERT_TRUE(rank.ok());
  auto r = HookCall(TempPath("tcp"), {{"op", "conn_corrupt"}, {"peer", 2}, {"path", 1}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->value("corrupt_frames_sent", 0), 1);
  auto bad = HookCall(TempPath("tcp"), {{"op", "melt"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unsupported"), std::string::npos);
}

// A one-shot hook fault is healed after the run, when its rank (and hook) is gone: that is not
// a failed revert; the observation says why nothing could be read back.
TEST(FaultHook, RevertAfterTheRankEndedIsClean) {
  char dir[] = "/tmp/fl-journal-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  auto journal = Journal::Open(dir);
  ASSERT_TRUE(journal.ok());
  auto policy = TargetPolicy::Create({}, nullptr, false);
  for (const char* kind : {"conn_corrupt", "qp_error"}) {
    auto rank = std::make_unique<FakeRank>(TempPath("gone"));
    ASSERT_TRUE(rank->ok());
    auto fault = CreateFault(kind, {{"hook", TempPath("gone")}, {"peer", 1}, {"path", 0}});
    ASSERT_TRUE(fault.ok()) << fault.status().ToString();
    auto inj = Injection::Arm(std::move(fault).value(), journal->get(), *policy);
    ASSERT_TRUE(inj.ok()) << inj.status().ToString();
    ASSERT_TRUE((*inj)->ApplyAt().ok()) << kind;
    EXPECT_EQ((*inj)->apply_timing().observation.value("in_effect", false), true) << kind;
    rank.reset();  // the rank ends and takes its hook with it
    Status st = (*inj)->RevertAt();
    EXPECT_TRUE(st.ok()) << kind << ": " << st.ToString();
    EXPECT_TRUE((*inj)->reverted()) << kind;
    EXPECT_NE((*inj)->revert_timing().observation.value("hook", "").find("the rank has ended"),
              std::string::npos)
        << (*inj)->revert_timing().observation.dump();
  }
  // Before a revert, a missing hook is still an error.
  auto fault = CreateFault("conn_corrupt", {{"hook", TempPath("gone")}, {"peer", 1}, {"path", 0}});
  ASSERT_TRUE(fault.ok());
  EXPECT_FALSE((*fault)->Observe().ok());
  Sh(std::string("rm -rf ") + dir);
}

}  // namespace
}  // namespace faultline::testing
