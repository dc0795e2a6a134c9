// Client side of the fault-hook protocol (fault_hook.h). Each call opens one connection,
// sends one request line, reads one response line and closes. Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace faultline {

// Sends `request` (the "v" field is added) and returns the response object when it has
// "ok": true. Unavailable with a clear message when nothing listens at `path`; kInternal for a
// malformed response; kKernel with the rank's error text when it answered ok=false.
Result<nlohmann::json> HookCall(const std::string& path, nlohmann::json request,
                                int64_t timeout_ns = 2'000'000'000);

}  // namespace faultline
