#include "runner/core/worker_log.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

namespace faultline::runner {
namespace {

using nlohmann::json;

std::string Line(const json& j) { return j.dump() + "\n"; }

template <typename T>
std::optional<T> OptField(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return it->get<T>();
}

WorkerHeader HeaderFrom(const json& j) {
  WorkerHeader h;
  h.rank = j.at("rank").get<int>();
  h.size = j.at("size").get<int>();
  h.ccl = j.at("ccl").get<std::string>();
  h.op = j.at("op").get<std::string>();
  h.dtype = j.at("dtype").get<std::string>();
  h.redop = j.value("redop", std::string("none"));
  h.root = j.value("root", 0);
  h.bytes = j.at("bytes").get<uint64_t>();
  h.count = j.at("count").get<uint64_t>();
  h.busbw_factor = j.at("busbw_factor").get<double>();
  h.rails = j.at("rails").get<std::vector<std::string>>();
  h.pid = j.at("pid").get<int64_t>();
  h.check = j.value("check", false);
  h.events = j.value("events", false);
  h.warmup = j.value("warmup", int64_t{0});
  h.iters = OptField<int64_t>(j, "iters");
  h.duration_ns = OptField<int64_t>(j, "duration_ns");
  h.timeout_ms = j.value("timeout_ms", int64_t{0});
  h.seed = j.value("seed", uint64_t{0});
  if (auto it = j.find("rails_used"); it != j.end() && !it->is_null()) {
    h.rails_used = it->get<std::vector<int>>();
  }
  h.ccl_version = j.value("ccl_version", std::string());
  if (auto it = j.find("ccl_knobs"); it != j.end() && it->is_object()) {
    for (const auto& [k, v] : it->items()) {
      if (v.is_string()) h.ccl_knobs[k] = v.get<std::string>();
    }
  }
  h.workload = j.value("workload", std::string("collectives"));
  if (auto it = j.find("train"); it != j.end() && !it->is_null()) {
    const json& t = *it;
    TrainHeader th;
    th.steps = t.at("steps").get<int64_t>();
    th.batch = t.at("batch").get<int64_t>();
    th.compute_ms = t.at("compute_ms").get<int64_t>();
    th.grad_bytes = t.at("grad_bytes").get<uint64_t>();
    th.checkpoint_every = t.at("checkpoint_every").get<int64_t>();
    th.policy = t.at("policy").get<std::string>();
    th.incarnation = t.at("incarnation").get<int64_t>();
    th.wait_bound_ms = t.at("wait_bound_ms").get<int64_t>();
    th.start_step = t.at("start_step").get<int64_t>();
    h.train = th;
  }
  return h;
}

// Applies one parsed line to `log`. Returns an error message, empty when fine.
std::string Apply(const json& j, bool first, WorkerLog* log) {
  if (!j.is_object()) return "not a JSON object";
  const std::string type = j.value("type", std::string());
  if (first != (type == "header"))
    return first ? "the first line is not the header" : "a second header";
  if (type == "header") {
    if (j.value("schema", std::string()) != kWorkerLogSchema) {
      return std::string("schema is not ") + kWorkerLogSchema;
    }
    log->header = HeaderFrom(j);
    if (log->header.workload == "train" && !log->header.train) {
      return "a train header without its \"train\" object";
    }
    if (const auto& t = log->header.train;
        t && (t->steps < 1 || t->batch < 1 || t->start_step < 0 || t->start_step > t->steps)) {
      return "train header: steps, batch or start_step out of range";
    }
    return "";
  }
  if (log->end) return "a line after the end line";
  if (type == "op") {
    OpRecord r;
    r.rank = log->header.rank;
    r.index = j.at("index").get<int64_t>();
    r.start_ns = j.at("start_ns").get<int64_t>();
    r.end_ns = j.at("end_ns").get<int64_t>();
    r.bytes = j.at("bytes").get<uint64_t>();
    r.ok = j.at("ok").get<bool>();
    r.group = j.value("group", 0);
    if (const std::optional<int64_t> c = OptField<int64_t>(j, "compute_ns"); c && *c < 0) {
      return "op line: negative compute_ns";
    }
    if (r.group < 0 || r.group > log->header.size) return "op line: group out of range";
    const std::optional<uint64_t> wrong = OptField<uint64_t>(j, "wrong");
    r.wrong = wrong.value_or(0) > 0;
    log->wrong_elements += wrong.value_or(0);
    if (!r.ok && log->first_error.empty()) log->first_error = j.value("error", std::string("?"));
    log->ops.push_back(r);
    return "";
  }
  if (type == "event") {
    CclEvent e;
    e.rank = log->header.rank;
    e.time_ns = j.at("t_ns").get<int64_t>();
    const std::string kind = j.at("kind").get<std::string>();
    const std::optional<EventKind> k = ParseEventKind(kind);
    if (!k) return "unknown event kind '" + kind + "'";
    e.kind = *k;
    e.path = j.value("path", -1);
    e.peer = j.value("peer", -1);
    e.reason = j.value("reason", std::string());
    log->events.push_back(std::move(e));
    return "";
  }
  if (type == "shrink") {
    ShrinkRecord s;
    s.rank = log->header.rank;
    s.start_ns = j.at("start_ns").get<int64_t>();
    s.end_ns = j.at("end_ns").get<int64_t>();
    s.excluded = j.at("excluded").get<std::vector<int>>();
    s.group = j.at("group").get<int>();
    s.ok = j.at("ok").get<bool>();
    s.error = j.value("error", std::string());
    if (s.group < 1 || s.group > log->header.size) return "shrink line: group out of range";
    for (int r : s.excluded) {
      if (r < 0 || r >= log->header.size || r == log->header.rank) {
        return "shrink line: excluded rank " + std::to_string(r) + " out of range";
      }
    }
    log->shrinks.push_back(std::move(s));
    return "";
  }
  if (type == "grow") {
    GrowRecord g;
    g.rank = log->header.rank;
    g.start_ns = j.at("start_ns").get<int64_t>();
    g.end_ns = j.at("end_ns").get<int64_t>();
    g.joined = j.at("joined").get<std::vector<int>>();
    g.group = j.at("group").get<int>();
    g.joiner = j.at("joiner").get<bool>();
    g.ok = j.at("ok").get<bool>();
    g.error = j.value("error", std::string());
    if (g.group < 1 || g.group > log->header.size) return "grow line: group out of range";
    if (g.joined.empty()) return "grow line: no rank joined";
    for (int r : g.joined) {
      if (r < 0 || r >= log->header.size) {
        return "grow line: joined rank " + std::to_string(r) + " out of range";
      }
    }
    const bool self = std::find(g.joined.begin(), g.joined.end(), g.rank) != g.joined.end();
    if (self != g.joiner) return "grow line: joiner disagrees with the joined ranks";
    log->grows.push_back(std::move(g));
    return "";
  }
  if (type == "checkpoint") {
    CheckpointRecord c;
    c.rank = log->header.rank;
    c.step = j.at("step").get<int64_t>();
    c.samples = j.at("samples").get<uint64_t>();
    c.start_ns = j.at("start_ns").get<int64_t>();
    c.end_ns = j.at("end_ns").get<int64_t>();
    c.bytes = j.at("bytes").get<uint64_t>();
    if (c.step < 1) return "checkpoint line: step below 1";
    if (c.end_ns < c.start_ns) return "checkpoint line: ends before it starts";
    log->checkpoints.push_back(c);
    return "";
  }
  if (type == "resume") {
    if (!log->resumes.empty()) return "a second resume line";
    ResumeRecord r;
    r.rank = log->header.rank;
    r.step = j.at("step").get<int64_t>();
    r.samples = j.at("samples").get<uint64_t>();
    r.start_ns = j.at("start_ns").get<int64_t>();
    r.end_ns = j.at("end_ns").get<int64_t>();
    if (r.step < 0) return "resume line: negative step";
    if (r.end_ns < r.start_ns) return "resume line: ends before it starts";
    log->resumes.push_back(r);
    return "";
  }
  if (type == "hold") {
    HoldRecord h;
    h.rank = log->header.rank;
    h.start_ns = j.at("start_ns").get<int64_t>();
    h.end_ns = j.at("end_ns").get<int64_t>();
    h.returned = j.at("returned").get<bool>();
    if (h.end_ns < h.start_ns) return "hold line: ends before it starts";
    log->holds.push_back(h);
    return "";
  }
  if (type == "decision") {
    DecisionRecord d;
    d.rank = log->header.rank;
    d.t_ns = j.at("t_ns").get<int64_t>();
    d.latency_ns = j.at("latency_ns").get<int64_t>();
    d.decision = j.at("decision");
    if (!d.decision.is_object()) return "decision line: decision is not an object";
    d.chosen = d.decision.at("chosen").get<std::string>();
    if (d.latency_ns < 0) return "decision line: negative latency_ns";
    log->decisions.push_back(std::move(d));
    return "";
  }
  if (type == "ready") {
    if (log->ready_ns) return "a second ready line";
    log->ready_ns = j.at("t_ns").get<int64_t>();
    return "";
  }
  if (type == "sync") {
    SyncRecord r;
    r.rank = log->header.rank;
    r.after_index = j.at("after_index").get<int64_t>();
    r.start_ns = j.at("start_ns").get<int64_t>();
    r.end_ns = j.at("end_ns").get<int64_t>();
    r.ok = j.at("ok").get<bool>();
    log->syncs.push_back(r);
    return "";
  }
  if (type == "result") {
    if (log->result) return "a second result line";
    TrainResult r;
    r.rank = log->header.rank;
    r.param_sha256 = j.at("param_sha256").get<std::string>();
    const bool hex = r.param_sha256.size() == 64 &&
                     std::all_of(r.param_sha256.begin(), r.param_sha256.end(), [](char c) {
                       return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                     });
    if (!hex) return "param_sha256 is not a SHA-256 digest (64 lowercase hex digits)";
    // JSON has no NaN: a diverged loss is written as null.
    r.loss = j.at("loss").is_null() ? std::nan("") : j.at("loss").get<double>();
    r.steps = OptField<int64_t>(j, "steps");
    r.samples = OptField<uint64_t>(j, "samples");
    if (r.steps && *r.steps < 0) return "result line: negative steps";
    log->result = std::move(r);
    return "";
  }
  if (type == "stats") {
    if (log->stats) return "a second stats line";
    const json& c = j.at("counters");
    if (!c.is_object()) return "stats line: counters is not an object";
    std::map<std::string, uint64_t> counters;
    for (const auto& [name, value] : c.items()) {
      if (!value.is_number_unsigned() &&
          !(value.is_number_integer() && value.get<int64_t>() >= 0)) {
        return "stats line: counter " + name + " is not a count";
      }
      counters[name] = value.get<uint64_t>();
    }
    log->stats = std::move(counters);
    return "";
  }
  if (type == "end") {
    const std::string status = j.at("status").get<std::string>();
    if (status != "ok" && status != "error") return "unknown end status '" + status + "'";
    RankEnd end;
    end.rank = log->header.rank;
    end.exit = status == "ok" ? RankExit::kCompleted : RankExit::kError;
    end.end_ns = j.at("t_ns").get<int64_t>();
    end.first_error_ns = OptField<int64_t>(j, "first_error_ns");
    end.watchdog = j.value("watchdog", false);
    end.restart = j.value("restart", false);
    if (end.restart && end.exit != RankExit::kError) return "end line: a restart with status ok";
    log->end = end;
    log->restart = end.restart;
    log->end_message = j.value("message", std::string());
    return "";
  }
  return "unknown line type '" + type + "'";
}

}  // namespace

std::string WorkerHeaderLine(const WorkerHeader& h) {
  json j;
  j["type"] = "header";
  j["schema"] = kWorkerLogSchema;
  j["rank"] = h.rank;
  j["size"] = h.size;
  j["ccl"] = h.ccl;
  j["op"] = h.op;
  j["dtype"] = h.dtype;
  j["redop"] = h.redop;
  j["root"] = h.root;
  j["bytes"] = h.bytes;
  j["count"] = h.count;
  j["busbw_factor"] = h.busbw_factor;
  j["rails"] = h.rails;
  j["pid"] = h.pid;
  j["check"] = h.check;
  j["events"] = h.events;
  j["warmup"] = h.warmup;
  j["iters"] = h.iters ? json(*h.iters) : json(nullptr);
  j["duration_ns"] = h.duration_ns ? json(*h.duration_ns) : json(nullptr);
  j["timeout_ms"] = h.timeout_ms;
  j["seed"] = h.seed;
  j["rails_used"] = h.rails_used ? json(*h.rails_used) : json(nullptr);
  j["ccl_version"] = h.ccl_version;
  if (!h.ccl_knobs.empty()) j["ccl_knobs"] = h.ccl_knobs;
  if (h.workload != "collectives") j["workload"] = h.workload;
  if (h.train) {
    const TrainHeader& t = *h.train;
    j["train"] = {{"steps", t.steps},
                  {"batch", t.batch},
                  {"compute_ms", t.compute_ms},
                  {"grad_bytes", t.grad_bytes},
                  {"checkpoint_every", t.checkpoint_every},
                  {"policy", t.policy},
                  {"incarnation", t.incarnation},
                  {"wait_bound_ms", t.wait_bound_ms},
                  {"start_step", t.start_step}};
  }
  return Line(j);
}

std::string WorkerReadyLine(int64_t t_ns) {
  nlohmann::json j;
  j["type"] = "ready";
  j["t_ns"] = t_ns;
  return Line(j);
}

std::string WorkerSyncLine(const SyncRecord& s) {
  json j;
  j["type"] = "sync";
  j["after_index"] = s.after_index;
  j["start_ns"] = s.start_ns;
  j["end_ns"] = s.end_ns;
  j["ok"] = s.ok;
  return Line(j);
}

std::string WorkerResultLine(const TrainResult& r) {
  json j;
  j["type"] = "result";
  j["param_sha256"] = r.param_sha256;
  j["loss"] = std::isnan(r.loss) ? json(nullptr) : json(r.loss);
  if (r.steps) j["steps"] = *r.steps;
  if (r.samples) j["samples"] = *r.samples;
  return Line(j);
}

std::string WorkerCheckpointLine(const CheckpointRecord& c) {
  json j;
  j["type"] = "checkpoint";
  j["step"] = c.step;
  j["samples"] = c.samples;
  j["start_ns"] = c.start_ns;
  j["end_ns"] = c.end_ns;
  j["bytes"] = c.bytes;
  return Line(j);
}

std::string WorkerResumeLine(const ResumeRecord& r) {
  json j;
  j["type"] = "resume";
  j["step"] = r.step;
  j["samples"] = r.samples;
  j["start_ns"] = r.start_ns;
  j["end_ns"] = r.end_ns;
  return Line(j);
}

std::string WorkerHoldLine(const HoldRecord& h) {
  json j;
  j["type"] = "hold";
  j["start_ns"] = h.start_ns;
  j["end_ns"] = h.end_ns;
  j["returned"] = h.returned;
  return Line(j);
}

std::string WorkerDecisionLine(const DecisionRecord& d) {
  json j;
  j["type"] = "decision";
  j["t_ns"] = d.t_ns;
  j["latency_ns"] = d.latency_ns;
  j["decision"] = d.decision;
  return Line(j);
}

std::string WorkerOpLine(const WorkerOp& op) {
  json j;
  j["type"] = "op";
  j["index"] = op.index;
  j["start_ns"] = op.start_ns;
  j["end_ns"] = op.end_ns;
  j["bytes"] = op.bytes;
  j["ok"] = op.ok;
  j["wrong"] = op.wrong ? json(*op.wrong) : json(nullptr);
  j["warmup"] = op.warmup;
  if (!op.ok) j["error"] = op.error;
  if (op.group > 0) j["group"] = op.group;
  if (op.compute_ns) j["compute_ns"] = *op.compute_ns;
  return Line(j);
}

std::string WorkerShrinkLine(const ShrinkRecord& s) {
  json j;
  j["type"] = "shrink";
  j["start_ns"] = s.start_ns;
  j["end_ns"] = s.end_ns;
  j["excluded"] = s.excluded;
  j["group"] = s.group;
  j["ok"] = s.ok;
  if (!s.ok) j["error"] = s.error;
  return Line(j);
}

std::string WorkerGrowLine(const GrowRecord& g) {
  json j;
  j["type"] = "grow";
  j["start_ns"] = g.start_ns;
  j["end_ns"] = g.end_ns;
  j["joined"] = g.joined;
  j["group"] = g.group;
  j["joiner"] = g.joiner;
  j["ok"] = g.ok;
  if (!g.ok) j["error"] = g.error;
  return Line(j);
}

std::string WorkerEventLine(const CclEvent& e) {
  json j;
  j["type"] = "event";
  j["t_ns"] = e.time_ns;
  j["kind"] = EventKindName(e.kind);
  j["path"] = e.path;
  if (e.peer >= 0) j["peer"] = e.peer;
  j["reason"] = e.reason;
  return Line(j);
}

std::string WorkerStatsLine(int64_t t_ns, const std::map<std::string, uint64_t>& counters) {
  json j;
  j["type"] = "stats";
  j["t_ns"] = t_ns;
  j["counters"] = json::object();
  for (const auto& [name, value] : counters) j["counters"][name] = value;
  return Line(j);
}

std::string WorkerEndLine(const WorkerEnd& end) {
  json j;
  j["type"] = "end";
  j["status"] = end.ok ? "ok" : "error";
  j["message"] = end.message;
  j["t_ns"] = end.t_ns;
  j["first_error_ns"] = end.first_error_ns ? json(*end.first_error_ns) : json(nullptr);
  if (end.watchdog) j["watchdog"] = true;
  if (end.restart) j["restart"] = true;
  return Line(j);
}

Result<WorkerLog> ParseWorkerLog(std::string_view text, const std::string& name) {
  WorkerLog log;
  size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    ++line_no;
    const size_t nl = text.find('\n', pos);
    const bool last_unterminated = nl == std::string_view::npos;
    const std::string_view line =
        text.substr(pos, last_unterminated ? std::string_view::npos : nl - pos);
    pos = last_unterminated ? text.size() : nl + 1;
    const std::string where = name + ":" + std::to_string(line_no) + ": ";
    if (line.empty()) {
      if (last_unterminated) break;
      return InvalidArgument(where + "empty line");
    }
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      if (last_unterminated) {  // the writer was killed in the middle of this line
        log.truncated = true;
        break;
      }
      return InvalidArgument(where + "not valid JSON");
    }
    std::string error;
    try {
      error = Apply(j, line_no == 1, &log);
    } catch (const json::exception& e) {
      error = std::string("missing or mistyped field: ") + e.what();
    }
    if (!error.empty()) return InvalidArgument(where + error);
  }
  if (line_no == 0 || (line_no == 1 && log.truncated)) {
    return InvalidArgument(name + ": no header (the worker wrote nothing)");
  }
  return log;
}

Result<WorkerLog> LoadWorkerLog(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read worker log " + path);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return NotFound("cannot read worker log " + path);
  return ParseWorkerLog(text.str(), path);
}

void MapWorkerLogToRunnerClock(WorkerLog* log, int64_t offset_ns) {
  if (offset_ns == 0) return;
  auto at = [offset_ns](int64_t& t) { t -= offset_ns; };
  auto spans = [&](auto& records) {
    for (auto& r : records) {
      at(r.start_ns);
      at(r.end_ns);
    }
  };
  spans(log->ops);
  spans(log->syncs);
  spans(log->shrinks);
  spans(log->grows);
  spans(log->checkpoints);
  spans(log->resumes);
  spans(log->holds);
  for (CclEvent& e : log->events) at(e.time_ns);
  for (DecisionRecord& d : log->decisions) at(d.t_ns);
  if (log->ready_ns) at(*log->ready_ns);
  if (log->end) {
    at(log->end->end_ns);
    if (log->end->first_error_ns) at(*log->end->first_error_ns);
  }
}

}  // namespace faultline::runner
