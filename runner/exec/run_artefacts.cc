#include "runner/exec/run_artefacts.h"

#include <nlohmann/json.hpp>
#include <string>

#include "reports/run_files.h"
#include "runner/core/metrics.h"

namespace faultline::runner {

std::vector<reports::SeriesPoint> SeriesOf(const History& h, int64_t t0_ns) {
  std::vector<reports::SeriesPoint> out;
  for (const auto& op : CompleteOps(h)) {
    reports::SeriesPoint p;
    p.index = op.index;
    p.start_s = (op.start_ns - t0_ns) / 1e9;
    p.end_s = (op.end_ns - t0_ns) / 1e9;
    p.duration_ms = (op.end_ns - op.start_ns) / 1e6;
    p.bytes = op.bytes;
    p.busbw_gbps = op.busbw_gbps;
    out.push_back(p);
  }
  return out;
}

void WriteTimeseriesCsv(const History& h, int64_t t0_ns, std::ostream& out) {
  out << reports::TimeseriesCsv(SeriesOf(h, t0_ns));
}

std::vector<nlohmann::json> EventLinesOf(const History& h, int64_t t0_ns) {
  std::vector<nlohmann::json> ev;
  for (const auto& f : h.faults) {
    nlohmann::json j = {
        {"type", "fault"}, {"id", f.id}, {"kind", f.kind}, {"target", f.target.ToJson()}};
    j["scheduled_s"] = (f.scheduled_ns - t0_ns) / 1e9;
    j["applied_s"] = f.applied_ns ? nlohmann::json((*f.applied_ns - t0_ns) / 1e9) : nullptr;
    j["reverted_s"] = f.reverted_ns ? nlohmann::json((*f.reverted_ns - t0_ns) / 1e9) : nullptr;
    if (!f.error.empty()) j["error"] = f.error;
    ev.push_back(std::move(j));
  }
  // Each rank's first failure in the library's own words (every library: the same line).
  for (const RankEnd& r : h.ranks) {
    if (r.error.empty() || !r.first_error_ns) continue;
    ev.push_back(nlohmann::json{{"type", "rank_error"},
                                {"t_s", (*r.first_error_ns - t0_ns) / 1e9},
                                {"rank", r.rank},
                                {"error", r.error}});
  }
  for (const auto& e : h.events) {
    reports::EventRow row;
    row.t_s = (e.time_ns - t0_ns) / 1e9;
    row.rank = e.rank;
    row.kind = EventKindName(e.kind);
    row.path = e.path;
    row.reason = e.reason;
    ev.push_back(reports::CclEventJson(row));
  }
  // The training workload: the selector's decisions (each with its inputs and every option's
  // estimate, policy::ValidateDecisionJson), restarts, checkpoints, holds.
  for (const auto& d : h.decisions) {
    nlohmann::json j = d.decision;
    j["type"] = "policy_decision";
    j["kind"] = "policy_decision";
    j["t_s"] = (d.t_ns - t0_ns) / 1e9;
    j["rank"] = d.rank;
    j["latency_ms"] = d.latency_ns / 1e6;
    ev.push_back(std::move(j));
  }
  for (const auto& r : h.restarts) {
    ev.push_back(nlohmann::json{{"type", "restart"},
                         {"t_s", (r.detected_ns - t0_ns) / 1e9},
                         {"incarnation", r.incarnation},
                         {"why", r.why},
                         {"relaunched_s", (r.relaunched_ns - t0_ns) / 1e9},
                         {"cost_ms",
                          r.cost_ns ? nlohmann::json(*r.cost_ns / 1e6) : nlohmann::json()},
                         {"resumed_step",
                          r.resumed_step ? nlohmann::json(*r.resumed_step) : nlohmann::json()}});
  }
  for (const auto& c : h.checkpoints) {
    ev.push_back(nlohmann::json{{"type", "checkpoint"},
                         {"t_s", (c.start_ns - t0_ns) / 1e9},
                         {"rank", c.rank},
                         {"incarnation", c.incarnation},
                         {"step", c.step},
                         {"samples", c.samples},
                         {"write_ms", (c.end_ns - c.start_ns) / 1e6},
                         {"bytes", c.bytes}});
  }
  for (const auto& r : h.holds) {
    ev.push_back(nlohmann::json{{"type", "hold"},
                         {"t_s", (r.start_ns - t0_ns) / 1e9},
                         {"rank", r.rank},
                         {"duration_ms", (r.end_ns - r.start_ns) / 1e6},
                         {"returned", r.returned}});
  }
  // Policy shrink: one line per surviving rank's shrink, with its duration.
  for (const auto& s : h.shrinks) {
    nlohmann::json j = {{"type", "shrink"},
                        {"t_s", (s.start_ns - t0_ns) / 1e9},
                        {"rank", s.rank},
                        {"duration_ms", (s.end_ns - s.start_ns) / 1e6},
                        {"excluded", s.excluded},
                        {"group", s.group},
                        {"ok", s.ok}};
    if (!s.ok) j["error"] = s.error;
    ev.push_back(std::move(j));
  }
  // A rejoin after repair: one line per rank's grow (members and joiners), with its duration.
  for (const auto& g : h.grows) {
    nlohmann::json j = {{"type", "grow"},
                        {"t_s", (g.start_ns - t0_ns) / 1e9},
                        {"rank", g.rank},
                        {"duration_ms", (g.end_ns - g.start_ns) / 1e6},
                        {"joined", g.joined},
                        {"group", g.group},
                        {"joiner", g.joiner},
                        {"ok", g.ok}};
    if (!g.ok) j["error"] = g.error;
    ev.push_back(std::move(j));
  }
  return ev;
}

void WriteEventsJsonl(const History& h, int64_t t0_ns, std::ostream& out) {
  out << reports::EventsJsonl(EventLinesOf(h, t0_ns));
}

}  // namespace faultline::runner
