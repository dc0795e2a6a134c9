#include "runner/exec/run_artefacts.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "runner/core/metrics.h"

namespace faultline::runner {
namespace {

std::string Fmt(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

}  // namespace

void WriteTimeseriesCsv(const History& h, int64_t t0_, std::ostream& ts) {
  ts << "index,start_s,end_s,duration_ms,bytes,busbw_gbps\n";
  for (const auto& op : CompleteOps(h)) {
    ts << op.index << "," << Fmt("%.6f", (op.start_ns - t0_) / 1e9) << ","
       << Fmt("%.6f", (op.end_ns - t0_) / 1e9) << ","
       << Fmt("%.3f", (op.end_ns - op.start_ns) / 1e6) << "," << op.bytes << ","
       << Fmt("%.4f", op.busbw_gbps) << "\n";
  }
}

void WriteEventsJsonl(const History& h, int64_t t0_, std::ostream& ev) {
  for (const auto& f : h.faults) {
    nlohmann::json j = {
        {"type", "fault"}, {"id", f.id}, {"kind", f.kind}, {"target", f.target.ToJson()}};
    j["scheduled_s"] = (f.scheduled_ns - t0_) / 1e9;
    j["applied_s"] = f.applied_ns ? nlohmann::json((*f.applied_ns - t0_) / 1e9) : nullptr;
    j["reverted_s"] = f.reverted_ns ? nlohmann::json((*f.reverted_ns - t0_) / 1e9) : nullptr;
    if (!f.error.empty()) j["error"] = f.error;
    ev << j.dump() << "\n";
  }
  for (const auto& e : h.events) {
    ev << nlohmann::json{{"type", "ccl_event"}, {"t_s", (e.time_ns - t0_) / 1e9},
                         {"rank", e.rank},      {"kind", EventKindName(e.kind)},
                         {"path", e.path},      {"reason", e.reason}}
              .dump()
       << "\n";
  }
  // The training workload: the selector's decisions (each with its inputs and every option's
  // estimate, policy::ValidateDecisionJson), restarts, checkpoints, holds.
  for (const auto& d : h.decisions) {
    nlohmann::json j = d.decision;
    j["type"] = "policy_decision";
    j["kind"] = "policy_decision";
    j["t_s"] = (d.t_ns - t0_) / 1e9;
    j["rank"] = d.rank;
    j["latency_ms"] = d.latency_ns / 1e6;
    ev << j.dump() << "\n";
  }
  for (const auto& r : h.restarts) {
    ev << nlohmann::json{{"type", "restart"},
                         {"t_s", (r.detected_ns - t0_) / 1e9},
                         {"incarnation", r.incarnation},
                         {"why", r.why},
                         {"relaunched_s", (r.relaunched_ns - t0_) / 1e9},
                         {"cost_ms",
                          r.cost_ns ? nlohmann::json(*r.cost_ns / 1e6) : nlohmann::json()},
                         {"resumed_step",
                          r.resumed_step ? nlohmann::json(*r.resumed_step) : nlohmann::json()}}
              .dump()
       << "\n";
  }
  for (const auto& c : h.checkpoints) {
    ev << nlohmann::json{{"type", "checkpoint"},
                         {"t_s", (c.start_ns - t0_) / 1e9},
                         {"rank", c.rank},
                         {"incarnation", c.incarnation},
                         {"step", c.step},
                         {"samples", c.samples},
                         {"write_ms", (c.end_ns - c.start_ns) / 1e6},
                         {"bytes", c.bytes}}
              .dump()
       << "\n";
  }
  for (const auto& r : h.holds) {
    ev << nlohmann::json{{"type", "hold"},
                         {"t_s", (r.start_ns - t0_) / 1e9},
                         {"rank", r.rank},
                         {"duration_ms", (r.end_ns - r.start_ns) / 1e6},
                         {"returned", r.returned}}
              .dump()
       << "\n";
  }
  // Policy shrink: one line per surviving rank's shrink, with its duration.
  for (const auto& s : h.shrinks) {
    nlohmann::json j = {{"type", "shrink"},
                        {"t_s", (s.start_ns - t0_) / 1e9},
                        {"rank", s.rank},
                        {"duration_ms", (s.end_ns - s.start_ns) / 1e6},
                        {"excluded", s.excluded},
                        {"group", s.group},
                        {"ok", s.ok}};
    if (!s.ok) j["error"] = s.error;
    ev << j.dump() << "\n";
  }
}

}  // namespace faultline::runner
