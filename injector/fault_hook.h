// The fault-hook control protocol, version 1: how the injector asks a running rank to hurt
// itself from inside (faults the kernel cannot inject from outside: an RDMA QP in the error
// state, a corrupt frame on one TCP connection). Full description: injector/FAULT_HOOK.md.
//
// Transport: a SOCK_STREAM Unix socket at a filesystem path that the rank serves (ftccl
// listens there when started with a hook path). One connection carries one exchange:
//   client -> rank: one request, a single JSON object on one line ending in '\n'
//   rank -> client: one response, a single JSON object on one line ending in '\n'
// then both sides close. UTF-8, at most kHookMaxLine bytes per line.
//
// Request:  {"v":1, "op":OP, "id":STR, "peer":INT, "path":INT}
//   op "ping"          no other field; answers {"ok":true, "rank":INT, "transport":STR}
//   op "qp_error"      move the QP that reaches rank `peer` over rail `path` to IBV_QPS_ERR
//   op "conn_corrupt"  write one frame with a corrupt checksum on the connection to `peer`
//                      over rail `path`; optional "part": "payload" (default) | "header"
//   op "query"         report the state of that connection without changing it
// Response: {"v":1, "id":STR, "ok":true,  ...} or {"v":1, "id":STR, "ok":false, "error":STR}
//   qp_error / query (verbs): "qp_state": "RESET"|"INIT"|"RTR"|"RTS"|"SQD"|"SQE"|"ERR"
//   conn_corrupt / query (tcp): "corrupt_frames_sent": INT (total on that connection),
//                               "pending": BOOL (armed, no data frame has carried it yet)
//   every successful fault op: "applied_ns": CLOCK_MONOTONIC time the rank applied it
// An op the transport does not support answers ok=false with error "unsupported".
#pragma once

#include <cstddef>

namespace faultline::hook {

inline constexpr int kProtocolVersion = 1;
inline constexpr size_t kHookMaxLine = 4096;
inline constexpr const char* kOpPing = "ping";
inline constexpr const char* kOpQpError = "qp_error";
inline constexpr const char* kOpConnCorrupt = "conn_corrupt";
inline constexpr const char* kOpQuery = "query";

}  // namespace faultline::hook
