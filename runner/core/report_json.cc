#include "runner/core/report_json.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <map>

#include "reports/schema.h"

namespace faultline::runner {
namespace {

nlohmann::json SecondsSince(int64_t origin, const std::optional<int64_t>& t) {
  if (!t) return nullptr;
  return static_cast<double>(*t - origin) / 1e9;
}

nlohmann::json OptString(const std::optional<std::string>& s) {
  return s ? nlohmann::json(*s) : nlohmann::json(nullptr);
}

// The timed stop agreements of a duration-bound loop (1-element allreduces through the library
// between collectives; their time is inside the collectives' cycles): how many, median and
// longest over every rank's, and how many failed. Null when the loop had none (iters-bound).
nlohmann::json StopAgreements(const History& h) {
  if (h.syncs.empty()) return nullptr;
  std::vector<double> ms;
  int failed = 0;
  for (const SyncRecord& s : h.syncs) {
    ms.push_back(static_cast<double>(s.end_ns - s.start_ns) / 1e6);
    failed += s.ok ? 0 : 1;
  }
  std::sort(ms.begin(), ms.end());
  return {{"count", ms.size()},
          {"median_ms", ms[ms.size() / 2]},
          {"max_ms", ms.back()},
          {"failed", failed}};
}

uint32_t Rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

}  // namespace

// Policy shrink: one entry per shrink of the group (the survivors' records of the same
// exclusion), timed from the first survivor starting it to the last one done.
static nlohmann::json Shrinks(const History& h) {
  std::map<std::vector<int>, std::vector<const ShrinkRecord*>> by_set;
  for (const ShrinkRecord& s : h.shrinks) by_set[s.excluded].push_back(&s);
  std::vector<nlohmann::json> out;
  for (const auto& [excluded, recs] : by_set) {
    int64_t from = recs.front()->start_ns, to = recs.front()->end_ns, slowest = 0;
    bool ok = true;
    nlohmann::json ranks = nlohmann::json::array();
    for (const ShrinkRecord* r : recs) {
      from = std::min(from, r->start_ns);
      to = std::max(to, r->end_ns);
      slowest = std::max(slowest, r->end_ns - r->start_ns);
      ok = ok && r->ok;
      ranks.push_back(r->rank);
    }
    out.push_back({{"excluded", excluded},
                   {"group", recs.front()->group},
                   {"ranks", std::move(ranks)},
                   {"start_s", static_cast<double>(from - h.run_start_ns) / 1e9},
                   {"duration_ms", static_cast<double>(to - from) / 1e6},
                   {"slowest_rank_ms", static_cast<double>(slowest) / 1e6},
                   {"ok", ok}});
  }
  std::sort(out.begin(), out.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return a["start_s"].get<double>() < b["start_s"].get<double>();
  });
  return nlohmann::json(std::move(out));
}

nlohmann::json BuildReportJson(const ReportInputs& in) {
  const Scenario& s = *in.scenario;
  const History& h = *in.history;
  const RunMetrics& m = *in.metrics;
  nlohmann::json faults = nlohmann::json::array();
  for (const FaultRecord& f : h.faults) {
    nlohmann::json j = {{"id", f.id},
                        {"type", f.kind},
                        {"target", f.target.ToJson()},
                        {"scheduled_s", SecondsSince(h.run_start_ns, f.scheduled_ns)},
                        {"applied_s", SecondsSince(h.run_start_ns, f.applied_ns)},
                        {"reverted_s", SecondsSince(h.run_start_ns, f.reverted_ns)},
                        {"observed_s", SecondsSince(h.run_start_ns, f.observed_ns)},
                        {"observed", f.observed}};
    if (!f.error.empty()) j["error"] = f.error;
    faults.push_back(std::move(j));
  }
  nlohmann::json per_fault = nlohmann::json::array();
  for (const FaultMetrics& fm : m.per_fault) {
    nlohmann::json j = {{"id", fm.id}};
    j.update(fm.values.ToJson());
    j["progress_ms"] = fm.progress_ms ? nlohmann::json(*fm.progress_ms) : nlohmann::json(nullptr);
    j["convergence"] =
        fm.convergence.empty() ? nlohmann::json(nullptr) : nlohmann::json(fm.convergence);
    j["never_converged"] = fm.never_converged;
    nlohmann::json flows = nlohmann::json::array();
    for (const Flow& fl : fm.flows) {
      flows.push_back({{"rank", fl.rank},
                       {"peer", fl.peer},
                       {"path", fl.path},
                       {"down_s", SecondsSince(h.run_start_ns, fl.down_ns)},
                       {"resumed_s", SecondsSince(h.run_start_ns, fl.resumed_ns)},
                       {"counted", fl.counted}});
    }
    j["flows"] = std::move(flows);
    if (in.fault_rails != nullptr) {
      for (const FaultRails& fr : *in.fault_rails) {
        if (fr.fault_id != fm.id) continue;
        nlohmann::json rails = nlohmann::json::array();
        for (const RailWindow& w : fr.rails) rails.push_back(w.ToJson());
        j["rails"] = std::move(rails);
      }
    }
    per_fault.push_back(std::move(j));
  }
  nlohmann::json expectations = nlohmann::json::array();
  for (const CheckResult& c : *in.checks) expectations.push_back(c.ToJson());
  nlohmann::json out = {
      {"schema", reports::kReportSchema},
      {"scenario",
       {{"name", s.name},
        {"file", in.scenario_file},
        {"sha256", in.scenario_sha256},
        {"seed", in.seed}}},
      {"environment", in.environment},
      {"ccl", CclNameString(s.ccl)},
      {"policy", RecoveryPolicyString(s.policy)},
      {"outcome", OutcomeName(m.outcome)},
      {"shrinks", Shrinks(h)},
      {"correctness",
       {{"checked", s.workload.check},
        {"wrong", s.workload.check && m.wrong_results ? nlohmann::json(*m.wrong_results)
                                                      : nlohmann::json(nullptr)}}},
      {"faults", std::move(faults)},
      {"window",
       {{"start_s", 0.0},
        {"end_s", SecondsSince(h.run_start_ns, WindowEndNs(h))},
        {"runner_end_s", SecondsSince(h.run_start_ns, h.run_end_ns)},
        {"rails_used", h.rails_used ? nlohmann::json(*h.rails_used) : nlohmann::json(nullptr)},
        {"stop_agreements", StopAgreements(h)}}},
      {"metrics", m.overall.ToJson()},
      {"per_fault", std::move(per_fault)},
      {"expectations", std::move(expectations)},
      {"files",
       {{"timeseries", OptString(in.files.timeseries)},
        {"events", OptString(in.files.events)},
        {"junit", OptString(in.files.junit)},
        {"html", OptString(in.files.html)},
        {"rails", OptString(in.files.rails)}}},
  };
  if (!in.rails_note.is_null()) out["rails"] = in.rails_note;
  if (in.training != nullptr) {
    out["metrics"].update(in.training->ToJson());
    nlohmann::json args = nlohmann::json::object();
    for (const auto& [k, v] : s.workload.script_args) args[k] = v;
    if (s.workload.kind == WorkloadKind::kTrain) {
      const Workload& w = s.workload;
      out["workload"] = {{"kind", "train"},
                         {"steps", w.iters.value_or(0)},
                         {"batch", w.batch},
                         {"compute_ms", w.compute_ns / 1e6},
                         {"grad_bytes", w.bytes},
                         {"checkpoint_every", w.checkpoint_every},
                         {"wait_bound_ms", w.wait_bound_ns / 1e6}};
      return out;
    }
    out["workload"] = {
        {"kind", WorkloadKindName(s.workload.kind)},
        {"script", s.workload.script.empty() ? nlohmann::json("faultline_torch.ddp_train")
                                             : nlohmann::json(s.workload.script)},
        {"steps", s.workload.iters.value_or(0)},
        {"warmup", s.workload.warmup_iters},
        {"args", std::move(args)}};
  }
  return out;
}

std::string Sha256Hex(const std::string& data) {
  static constexpr std::array<uint32_t, 64> k = {
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
      0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
      0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
      0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
      0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
      0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
      0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
      0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
      0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
      0xc67178f2};
  std::array<uint32_t, 8> hs = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::string msg = data;
  const uint64_t bits = static_cast<uint64_t>(data.size()) * 8;
  msg.push_back(static_cast<char>(0x80));
  while (msg.size() % 64 != 56) msg.push_back('\0');
  for (int i = 7; i >= 0; --i) msg.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  for (size_t off = 0; off < msg.size(); off += 64) {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i) {
      const auto* p = reinterpret_cast<const unsigned char*>(msg.data() + off + 4 * i);
      w[i] = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
    }
    for (int i = 16; i < 64; ++i) {
      const uint32_t s0 = Rotr(w[i - 15], 7) ^ Rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const uint32_t s1 = Rotr(w[i - 2], 17) ^ Rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = hs[0], b = hs[1], c = hs[2], d = hs[3], e = hs[4], f = hs[5], g = hs[6],
             hh = hs[7];
    for (int i = 0; i < 64; ++i) {
      const uint32_t s1 = Rotr(e, 6) ^ Rotr(e, 11) ^ Rotr(e, 25);
      const uint32_t ch = (e & f) ^ (~e & g);
      const uint32_t t1 = hh + s1 + ch + k[i] + w[i];
      const uint32_t s0 = Rotr(a, 2) ^ Rotr(a, 13) ^ Rotr(a, 22);
      const uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
      const uint32_t t2 = s0 + maj;
      hh = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    hs[0] += a;
    hs[1] += b;
    hs[2] += c;
    hs[3] += d;
    hs[4] += e;
    hs[5] += f;
    hs[6] += g;
    hs[7] += hh;
  }
  std::string out;
  char buf[9];
  for (uint32_t v : hs) {
    std::snprintf(buf, sizeof(buf), "%08x", v);
    out += buf;
  }
  return out;
}

}  // namespace faultline::runner
