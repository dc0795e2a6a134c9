// FaultTarget: what the fault hook (fault_hook.h) asks of a transport, namely faults a rank
// causes on its own connections because the kernel cannot cause them from outside (a corrupt
// frame on one TCP connection, a verbs QP in the error state).
//
// Each operation names one path: the connections of this rank to rank `peer` over rail `rail`.
// The defaults answer Unsupported(); a transport overrides what it can do (tcp: CorruptNextFrame
// and QueryPath; verbs: InjectQpError and QueryPath). The hook validates peer and rail against
// the communicator before it calls, and a transport checks them again.
//
// Thread-safety: every method may be called from any thread (the hook has its own) and returns
// by `deadline`, with kTimeout if the transport could not answer in time.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "ftccl/status.h"

namespace ftccl::transport {

// Which part of a frame conn_corrupt damages. kPayload: the payload checksum no longer matches
// (the receiver drops the chunk and asks for it again). kHeader: the header fails its own
// checksum (the stream cannot be trusted past it; the receiver drops the connection).
enum class FramePart : uint8_t { kPayload, kHeader };

// The fault state of one path, as the hook reports it.
struct PathFaultState {
  std::optional<uint64_t> corrupt_frames_sent;  // tcp: frames damaged on request, in total
  bool corrupt_pending = false;                 // tcp: armed, no data frame has carried it yet
  std::optional<std::string> qp_state;          // verbs: "RESET", "INIT", ..., "ERR"
  int64_t applied_ns = 0;  // CLOCK_MONOTONIC of the last fault applied on the path; 0: none
};

// The Status of an operation a transport cannot perform; the hook answers "unsupported".
inline Status Unsupported() { return Status(Code::kInvalidArgument, "unsupported"); }
inline bool IsUnsupported(const Status& st) {
  return st.code() == Code::kInvalidArgument && st.message() == "unsupported";
}

class FaultTarget {
 public:
  using Deadline = std::chrono::steady_clock::time_point;
  virtual ~FaultTarget() = default;

  // "tcp" or "verbs".
  virtual const char* TransportName() const = 0;

  // The path's state, unchanged.
  virtual Result<PathFaultState> QueryPath(int peer, int rail, Deadline deadline) {
    return Unsupported();
  }
  // conn_corrupt: the next data frame written on the path goes out damaged in `part`. Returns
  // once armed (corrupt_pending) or, when it already went out, with the new count.
  virtual Result<PathFaultState> CorruptNextFrame(int peer, int rail, FramePart part,
                                                  Deadline deadline) {
    return Unsupported();
  }
  // qp_error: moves the path's QP to the error state; returns the state after the change.
  virtual Result<PathFaultState> InjectQpError(int peer, int rail, Deadline deadline) {
    return Unsupported();
  }
};

}  // namespace ftccl::transport
