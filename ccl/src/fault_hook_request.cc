#include "fault_hook_request.h"

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "log.h"

namespace ftccl {
namespace {

using json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch())
      .count();
}

json Fail(json reply, const std::string& error) {
  reply["ok"] = false;
  reply["error"] = error;
  return reply;
}

// A non-negative int field of the request, or why not.
Result<int> IntField(const json& req, const char* name) {
  auto it = req.find(name);
  if (it == req.end()) return InvalidArgument(std::string("missing '") + name + "'");
  if (!it->is_number_integer()) {
    return InvalidArgument(std::string("'") + name + "' must be an integer, got " + it->dump());
  }
  const int64_t v = it->get<int64_t>();
  if (v < 0 || v > 1 << 20) {
    return InvalidArgument(std::string("'") + name + "' = " + std::to_string(v) +
                           " is out of range");
  }
  return static_cast<int>(v);
}

// Invalid UTF-8 (only from a bug: requests are validated by the parser) must not throw.
std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void PutState(const transport::PathFaultState& s, json* reply) {
  if (s.corrupt_frames_sent) {
    (*reply)["corrupt_frames_sent"] = *s.corrupt_frames_sent;
    (*reply)["pending"] = s.corrupt_pending;
  }
  if (s.qp_state) (*reply)["qp_state"] = *s.qp_state;
  if (s.applied_ns > 0) (*reply)["applied_ns"] = s.applied_ns;
}

json Answer(std::string_view line, const HookContext& ctx) {
  json reply = {{"v", kHookProtocolVersion}};
  json req = json::parse(std::string(line), nullptr, /*allow_exceptions=*/false);
  if (req.is_discarded() || !req.is_object()) {
    return Fail(reply, "request is not one JSON object");
  }
  if (auto id = req.find("id"); id != req.end()) {
    if (!id->is_string()) return Fail(reply, "'id' must be a string");
    reply["id"] = *id;
  }
  auto v = req.find("v");
  if (v == req.end() || !v->is_number_integer() || v->get<int64_t>() != kHookProtocolVersion) {
    return Fail(reply, "protocol version must be 1, got " + (v == req.end() ? "none" : v->dump()));
  }
  auto op_it = req.find("op");
  if (op_it == req.end() || !op_it->is_string()) return Fail(reply, "missing 'op'");
  const std::string op = op_it->get<std::string>();
  if (op == "ping") {
    reply["ok"] = true;
    reply["rank"] = ctx.rank;
    reply["transport"] = ctx.target->TransportName();
    return reply;
  }
  if (op != "query" && op != "conn_corrupt" && op != "qp_error") {
    return Fail(reply, "unknown op '" + op + "' (ping, query, conn_corrupt, qp_error)");
  }
  auto peer = IntField(req, "peer");
  if (!peer.ok()) return Fail(reply, peer.status().message());
  auto path = IntField(req, "path");
  if (!path.ok()) return Fail(reply, path.status().message());
  if (*peer >= ctx.size || *peer == ctx.rank) {
    return Fail(reply, "rank " + std::to_string(ctx.rank) + " has no connection to peer " +
                           std::to_string(*peer) + " (ranks 0.." + std::to_string(ctx.size - 1) +
                           ", not itself)");
  }
  if (*path >= ctx.num_rails) {
    return Fail(reply, "path " + std::to_string(*path) + " does not exist (" +
                           std::to_string(ctx.num_rails) + " rails)");
  }
  transport::FramePart part = transport::FramePart::kPayload;
  if (auto p = req.find("part"); p != req.end()) {
    if (op != "conn_corrupt" || !p->is_string() || (*p != "payload" && *p != "header")) {
      return Fail(reply, "'part' is \"payload\" or \"header\", for conn_corrupt only");
    }
    if (*p == "header") part = transport::FramePart::kHeader;
  }
  const auto deadline = SteadyClock::now() + kHookAnswerTimeout;
  Result<transport::PathFaultState> r = transport::Unsupported();
  if (op == "query") {
    r = ctx.target->QueryPath(*peer, *path, deadline);
  } else if (op == "qp_error") {
    r = ctx.target->InjectQpError(*peer, *path, deadline);
  } else {
    r = ctx.target->CorruptNextFrame(*peer, *path, part, deadline);
    // Answer once a data frame carried the damage (so that a query right after sees it), or
    // after kHookCorruptWait with "pending": true when no data flowed on the path meanwhile.
    // The damage is armed by then: a query that is not answered in that time (a busy progress
    // thread) leaves the answer at what was last known, never turns it into a failure.
    const auto wait_until = SteadyClock::now() + kHookCorruptWait;
    while (r.ok() && r->corrupt_pending && SteadyClock::now() < wait_until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      auto q = ctx.target->QueryPath(*peer, *path, wait_until);
      if (!q.ok()) break;
      r = std::move(q);
    }
    if (r.ok()) {
      LOG_INFO("HOOK", "conn_corrupt to rank %d on rail %d (%s): %s", *peer, *path,
               part == transport::FramePart::kHeader ? "header" : "payload",
               r->corrupt_pending ? "armed, no data frame yet" : "sent");
    }
  }
  if (!r.ok()) {
    return Fail(reply,
                transport::IsUnsupported(r.status()) ? "unsupported" : r.status().ToString());
  }
  reply["ok"] = true;
  PutState(r.value(), &reply);
  if (op == "conn_corrupt" && r->applied_ns == 0) reply["applied_ns"] = NowNs();
  return reply;
}

}  // namespace

std::string AnswerHookRequest(std::string_view line, const HookContext& ctx) {
  try {
    return Dump(Answer(line, ctx));
  } catch (const std::exception& e) {
    return Dump(Fail({{"v", kHookProtocolVersion}}, std::string("internal error: ") + e.what()));
  }
}

HookInput TakeHookRequestLine(std::string_view received) {
  const size_t eol = received.find('\n');
  if (eol != std::string_view::npos && eol + 1 <= kHookMaxLine) {
    return {HookInput::kLine, std::string(received.substr(0, eol))};
  }
  if (received.size() >= kHookMaxLine) return {HookInput::kTooLong, {}};
  return {};
}

std::string HookFailureLine(const std::string& error) {
  return Dump(Fail({{"v", kHookProtocolVersion}}, error));
}

}  // namespace ftccl
