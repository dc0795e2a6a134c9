// The fault-hook protocol's request handling apart from the socket (protocol:
// injector/FAULT_HOOK.md): a client's bytes become a request line, a request line becomes a
// response line. FaultHookServer calls these from its serving thread; they hold no state of
// their own and never throw.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "transport/fault_target.h"

namespace ftccl {

inline constexpr int kHookProtocolVersion = 1;
// Longest request line, its '\n' included.
inline constexpr size_t kHookMaxLine = 4096;
// A client must send its whole request line within this.
inline constexpr std::chrono::milliseconds kHookClientTimeout{1000};
// How long a request waits for the transport's progress thread to take it up (a thread slowed
// by a sanitizer under load once took over 1 s).
inline constexpr std::chrono::milliseconds kHookAnswerTimeout{5000};
// conn_corrupt waits this long for a data frame to carry the damage before it answers.
inline constexpr std::chrono::milliseconds kHookCorruptWait{600};

// What a client's bytes so far amount to.
struct HookInput {
  enum Kind { kNeedMore, kLine, kTooLong } kind = kNeedMore;
  std::string line;  // kLine: the request line without its '\n'
};
HookInput TakeHookRequestLine(std::string_view received);

// The communicator a request is about. REQUIRES: `target` is not null.
struct HookContext {
  transport::FaultTarget* target = nullptr;
  int rank = -1;
  int size = 0;
  int num_rails = 0;
};

// Answers one request line (without its '\n'): the response line, without '\n'. A bad
// request (not one JSON object, another version, an unknown op, a peer or path the
// communicator does not have) is answered with ok=false and the reason.
std::string AnswerHookRequest(std::string_view line, const HookContext& ctx);

// The response line for a failure outside any request (too long, too slow).
std::string HookFailureLine(const std::string& error);

}  // namespace ftccl
