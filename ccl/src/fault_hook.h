// FaultHookServer: the rank's side of the fault-hook protocol, version 1 (the protocol is
// specified in injector/FAULT_HOOK.md; ftccl implements it from that text and links nothing
// of the injector).
//
// A SOCK_STREAM Unix socket at a filesystem path (mode 0600). One connection carries one
// exchange: a request line (one JSON object, at most kMaxLine bytes with its '\n') and one
// response line. Ops: ping, query, conn_corrupt, qp_error; what a transport cannot do answers
// ok=false with error "unsupported". Every bad request (not JSON, too long, unknown op, a peer
// or path this communicator does not have, a client that sends nothing for kClientTimeout) is
// answered with ok=false and a reason, never a crash or a hang.
//
// Open() binds before the communicator connects (a bad path fails Create at once); Start()
// serves on a thread of its own once the transport runs. The destructor stops the thread,
// closes the socket and unlinks the path (if it is still this server's socket). Not copyable;
// Open, Start and the destructor are called from one thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <thread>

#include "ftccl/status.h"
#include "fault_hook_request.h"
#include "net.h"
#include "transport/fault_target.h"

namespace ftccl {

class FaultHookServer final {
 public:
  static constexpr int kProtocolVersion = kHookProtocolVersion;
  static constexpr size_t kMaxLine = kHookMaxLine;
  static constexpr std::chrono::milliseconds kClientTimeout = kHookClientTimeout;
  static constexpr std::chrono::milliseconds kCorruptWait = kHookCorruptWait;
  // Clients served at once; more wait in the listen backlog.
  static constexpr size_t kMaxClients = 8;

  // Binds and listens at `path`. kInvalidArgument for a path that cannot hold a Unix socket
  // (empty, too long for sun_path, an existing file that is not a socket, a socket another
  // process serves, a directory that does not exist or is not writable).
  static Result<std::unique_ptr<FaultHookServer>> Open(const std::string& path);
  ~FaultHookServer();
  FaultHookServer(const FaultHookServer&) = delete;
  FaultHookServer& operator=(const FaultHookServer&) = delete;

  // Serves requests about a communicator of `size` ranks over `num_rails` rails, this being
  // `rank`, through `target`. REQUIRES: called once; `target` outlives this server.
  Status Start(transport::FaultTarget* target, int rank, int size, int num_rails);

  const std::string& path() const { return path_; }

  // Answers one request line (without its '\n') about this server's communicator
  // (AnswerHookRequest). REQUIRES: Start() was called.
  std::string Handle(const std::string& line);

 private:
  explicit FaultHookServer(std::string path) : path_(std::move(path)) {}
  void Serve();

  std::string path_;
  net::Fd listen_;
  net::Fd stop_;  // eventfd: the destructor wakes the serving thread
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  std::thread thread_;
  transport::FaultTarget* target_ = nullptr;
  int rank_ = -1;
  int size_ = 0;
  int num_rails_ = 0;
};

}  // namespace ftccl
