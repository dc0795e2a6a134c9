// What the job saw: NCCL_DEBUG lines, PyTorch ProcessGroupNCCL's watchdog, ncclras text and
// JSON (log_lines.h).
#include "runner/incident/log_lines.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

namespace faultline::runner::incident_internal {

namespace {

// Classifies the message of an NCCL WARN/INFO line or an error line of the framework; fills
// the symptom's kind and what the message names. Empty kind: not a symptom.
void ClassifyNcclMessage(const std::string& msg, Symptom& sy, std::optional<Unreadable>& bad) {
  std::smatch m;
  if (msg.find("Got completion from peer") != std::string::npos) {
    // 2.10-2.19: "with error 12, opcode 0, len 0, vendor err 129"; 2.20-2.27: "with
    // status=12 opcode=0 len=0 vendor err 129 (Recv) ... hca mlx5_0"; 2.28+:
    // "with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_RECV(128) ... hca mlx5_0".
    if (!std::regex_search(msg, m,
                           Re(R"(Got completion from peer (\S+) with (?:error (\d{1,9})|status=(?:\w+\()?(\d{1,9})\)?)[ ,])"))) {
      bad = Unreadable{"an NCCL completion error without 'peer ADDR with status'"};
      return;
    }
    sy.kind = "ib_completion_error";
    sy.peer = m[1];
    auto st = ToInt(m[2].matched ? m[2].str() : m[3].str());
    if (st) sy.wc_status = static_cast<int>(*st);
    std::smatch h;
    if (std::regex_search(msg, h, Re(R"(\bhca (\S+))"))) sy.hca = h[1];
    return;
  }
  if (std::regex_search(msg, m, Re(R"(NET/IB ?: ?(?:(\S+:\d+) )?(?:Got (?:non-fatal )?async event|async fatal event))"))) {
    sy.kind = "ib_async_event";
    if (m[1].matched) sy.hca = m[1];
    return;
  }
  if (std::regex_search(msg, m, Re(R"(communicator was aborted on rank (\d+))"))) {
    sy.kind = "abort";
    sy.global_rank = ToInt32(m[1]);
    return;
  }
  if (std::regex_search(msg, m, Re(R"(Call to (ibv_\w+))"))) {
    sy.kind = "ib_verbs_error";
    return;
  }
  if (msg.find("ncclRemoteError") != std::string::npos ||
      msg.find("remote process exited") != std::string::npos) {
    sy.kind = "remote_error";
    return;
  }
  if (msg.find("NET/Socket") != std::string::npos || msg.find("socketProgress") != std::string::npos ||
      msg.find("Connection closed by remote peer") != std::string::npos ||
      std::regex_search(msg, Re(R"(^Net : |Call to \w+ failed|Connection (?:reset|refused))"))) {
    sy.kind = "socket_error";
    if (std::regex_search(msg, m, Re(R"(\bpeer ([^\s,]+))"))) sy.peer = m[1];
    return;
  }
  if (msg.find("ncclSystemError") != std::string::npos) {
    sy.kind = "system_error";
    return;
  }
  if (std::regex_search(msg, Re(R"(\b[Aa]bort(?:ed|ing)?\b)"))) {
    sy.kind = "abort";
    return;
  }
  if (std::regex_search(msg, Re(R"(\b(?:timeout|timed out|Timeout)\b)"))) {
    sy.kind = "timeout";
    return;
  }
}

// An NCCL_DEBUG_TIMESTAMP_FORMAT stamp (default "[%F %T] ", local time), or RAS's "[%F %T]".
bool TakeLocalStamp(std::string& rest, Symptom& sy) {
  std::smatch m;
  if (!std::regex_search(rest, m,
                         Re(R"(^\[(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)([.,]\d{1,9})?\]\s*)"))) {
    return false;
  }
  int64_t e = EpochSeconds(std::stoi(m[1]), std::stoi(m[2]) - 1, std::stoi(m[3]), std::stoi(m[4]),
                           std::stoi(m[5]), std::stoi(m[6]));
  if (e < 0) return false;
  std::string frac = m[7];
  if (!frac.empty()) frac[0] = '.';
  if (!sy.wall_ns) {
    sy.wall_ns = e * 1'000'000'000LL + FractionNs(frac);
    sy.wall_res_ns = ResolutionNs(frac);
    sy.year_assumed = false;
    sy.zone_assumed = true;
  }
  rest = m.suffix();
  return true;
}

}  // namespace

// A symptom in one line (NCCL debug output, the framework's watchdog, RAS text monitor);
// nullopt when the line is none of these.
std::optional<Symptom> SymptomOf(const std::string& raw, int year, std::optional<Unreadable>& bad) {
  Symptom sy;
  std::string body = raw;
  std::smatch m;
  // Slurm `srun --label`: "3: " (the task, which is the job's global rank).
  std::optional<int> task;
  if (std::regex_search(body, m, Re(R"(^\s*(\d{1,7}): (?=\S))"))) {
    const std::string after = m.suffix();
    if (std::regex_search(after, Re(R"(NCCL (?:WARN|INFO)|\[rank\d+\]|Watchdog|ncclRemoteError|ncclSystemError|remote process exited|communicator was aborted|PEER_|^\[\d{4}-|^[^\s:\[\]]+:\d+:\d+ \[)"))) {
      task = ToInt32(m[1]);
      body = after;
    }
  }
  Stamps st = Strip(body, year);
  sy.node = st.node;
  sy.kernel_s = st.kernel_s;
  sy.wall_ns = st.wall_ns;
  sy.wall_res_ns = st.wall_res_ns;
  sy.year_assumed = st.year_assumed;
  std::string rest = st.rest;
  TakeLocalStamp(rest, sy);
  // NCCL: "node17:12345:12400 [3] NCCL WARN ..." (2.x), with "file.cc:123 " and, in 2.29+,
  // "(function) " between the device and the level.
  if (std::regex_search(rest, Re(R"(^[^\s:\[\]]+:\d+:\d+(?: |$))"))) {
    if (!std::regex_search(rest, m,
                           Re(R"(^([^\s:\[\]]+):(\d+):(\d+) \[(\d+)\] (?:\S+:\d+ (?:\([^)]*\) )?)?NCCL (WARN|INFO)(?: (.*))?$)"))) {
      if (rest.find("NCCL") != std::string::npos || rest.find(" [") != std::string::npos ||
          rest.find(" ") == std::string::npos) {
        bad = Unreadable{"a truncated NCCL debug line"};
      }
      return std::nullopt;
    }
    const std::string msg = m[6];
    auto pid = ToInt(m[2]);
    auto dev = ToInt(m[4], 0, 1023);
    if (!pid || !dev) {
      bad = Unreadable{"an NCCL debug line with a pid or device out of range"};
      return std::nullopt;
    }
    if (m[5] == "WARN" && msg.find_first_not_of(' ') == std::string::npos) {
      bad = Unreadable{"an NCCL WARN line without its message (truncated)"};
      return std::nullopt;
    }
    sy.node = m[1];
    sy.pid = static_cast<int>(*pid);
    sy.local_rank = static_cast<int>(*dev);
    ClassifyNcclMessage(msg, sy, bad);
    if (sy.kind.empty()) return std::nullopt;
    if (task && !sy.global_rank) sy.global_rank = task;
    return sy;
  }
  // RAS text monitor: "[2025-12-19 13:07:07] PEER_DEAD: Process 1524345 on node 10.0.0.5
  // managing GPU 1".
  if (std::regex_search(rest, m, Re(R"(^(PEER_(?:DEAD|TIMEOUT_DEAD|UNRESPONSIVE|DISCONNECTED|SEND_STUCK|KEEPALIVE_TIMEOUT|INIT_TIMEOUT)): ?(.*)$)"))) {
    sy.kind = "ras";
    const std::string what = m[2];
    std::smatch p;
    if (std::regex_search(what, p, Re(R"(Process (\d+) on node (\S+)(?: managing GPU (\d+))?)"))) {
      sy.pid = ToInt32(p[1]);
      sy.node = p[2];
      if (p[3].matched) sy.local_rank = ToInt32(p[3], 1023);
    } else if (std::regex_search(what, p, Re(R"(^(\S+))"))) {
      sy.peer = p[1];
    }
    return sy;
  }
  // The framework (PyTorch ProcessGroupNCCL): "[rank3]:[E1128 03:14:07.123456 ...] [Rank 3]
  // Watchdog caught collective operation timeout: WorkNCCL(...) ran for 600012 milliseconds
  // before timing out.", "NCCL communicator was aborted on rank 3.", "ncclRemoteError: ...".
  std::optional<int> rank = task;
  if (std::regex_search(rest, m, Re(R"(^\[rank(\d{1,7})\]:\s*)"))) {
    rank = ToInt32(m[1]);
    rest = m.suffix();
  }
  if (std::regex_search(rest, m,
                        Re(R"(^\[?[EWIF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)(\.\d{1,9})?\s)"))) {
    int64_t e = EpochSeconds(year, std::stoi(m[1]) - 1, std::stoi(m[2]), std::stoi(m[3]),
                             std::stoi(m[4]), std::stoi(m[5]));
    if (e >= 0 && !sy.wall_ns) {
      sy.wall_ns = e * 1'000'000'000LL + FractionNs(m[6]);
      sy.wall_res_ns = ResolutionNs(m[6]);
      sy.year_assumed = true;
      sy.zone_assumed = true;
    }
  }
  if (std::regex_search(rest, m, Re(R"(\[Rank (\d{1,7})\])"))) rank = ToInt32(m[1]);
  if (rest.find("Watchdog caught collective operation timeout") != std::string::npos) {
    if (!std::regex_search(rest, Re(R"(WorkNCCL\(.*\) ran for \d+ milliseconds before timing out)"))) {
      bad = Unreadable{"a watchdog timeout line without 'WorkNCCL(...) ran for N milliseconds'"};
      return std::nullopt;
    }
    sy.kind = "timeout";
  } else if (rest.find("NCCL communicator was aborted") != std::string::npos ||
             rest.find("ncclRemoteError") != std::string::npos ||
             rest.find("remote process exited") != std::string::npos ||
             rest.find("ncclSystemError") != std::string::npos) {
    ClassifyNcclMessage(rest, sy, bad);
  } else {
    return std::nullopt;
  }
  if (sy.kind.empty()) return std::nullopt;
  if (!sy.global_rank && rank) sy.global_rank = rank;
  return sy;
}

// Symptoms in one ncclras JSON document (`ncclras -f json`, NCCL 2.28.7+: communicators with
// missing_ranks, each unresponsive or considered_dead; a rank whose status has abort_flag or
// async_error) or one event of its monitor mode (`ncclras -m -f json`, 2.29+: "event":
// "PEER_DEAD" with its "peer").
void RasSymptoms(const nlohmann::json& doc, const Symptom& base, std::vector<Symptom>& out) {
  auto int_of = [](const nlohmann::json& o, const char* key) -> std::optional<int> {
    auto it = o.find(key);
    if (it == o.end() || !it->is_number_integer()) return std::nullopt;
    const int64_t v = it->get<int64_t>();
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) return std::nullopt;
    return static_cast<int>(v);
  };
  auto str_of = [](const nlohmann::json& o, const char* key) -> std::string {
    auto it = o.find(key);
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto bool_of = [](const nlohmann::json& o, const char* key) {
    auto it = o.find(key);
    return it != o.end() && it->is_boolean() && it->get<bool>();
  };
  Symptom proto = base;
  proto.kind = "ras";
  {
    std::string ts = str_of(doc, "timestamp");
    std::string rest = "[" + ts + "]";
    TakeLocalStamp(rest, proto);
  }
  auto comms = doc.find("communicators");
  if (comms != doc.end() && comms->is_array()) {
    for (const auto& c : *comms) {
      if (!c.is_object()) continue;
      auto add = [&](const nlohmann::json& r, const std::string& why) {
        Symptom sy = proto;
        sy.global_rank = int_of(r, "rank");
        sy.node = str_of(r, "host");
        auto pid = int_of(r, "pid");
        if (pid && *pid >= 0) sy.pid = pid;
        sy.local_rank = int_of(r, "cuda_dev");
        sy.text = "ras: communicator " + str_of(c, "hash") + " rank " +
                  (sy.global_rank ? std::to_string(*sy.global_rank) : "?") + " on " + sy.node + ": " +
                  why;
        out.push_back(std::move(sy));
      };
      auto missing = c.find("missing_ranks");
      if (missing != c.end() && missing->is_array()) {
        for (const auto& r : *missing) {
          if (!r.is_object()) continue;
          auto status = r.find("status");
          if (status == r.end() || !status->is_object()) continue;
          if (bool_of(*status, "considered_dead")) {
            add(r, "considered dead");
          } else if (bool_of(*status, "unresponsive")) {
            add(r, "unresponsive");
          }
        }
      }
      auto ranks = c.find("ranks");
      if (ranks != c.end() && ranks->is_array()) {
        for (const auto& r : *ranks) {
          if (!r.is_object()) continue;
          auto status = r.find("status");
          if (status == r.end() || !status->is_object()) continue;
          auto err = int_of(*status, "async_error");
          if (bool_of(*status, "abort_flag")) {
            add(r, "aborted");
          } else if (err && *err != 0) {
            add(r, "async error " + std::to_string(*err));
          }
        }
      }
    }
    return;
  }
  const std::string event = str_of(doc, "event");
  static const std::set<std::string> kBad = {"PEER_DEAD",         "PEER_TIMEOUT_DEAD",
                                             "PEER_UNRESPONSIVE", "PEER_DISCONNECTED",
                                             "PEER_SEND_STUCK",   "PEER_KEEPALIVE_TIMEOUT",
                                             "PEER_INIT_TIMEOUT"};
  if (!kBad.count(event)) return;
  Symptom sy = proto;
  auto peer = doc.find("peer");
  if (peer != doc.end() && peer->is_object()) {
    sy.node = str_of(*peer, "host");
    if (sy.node.empty()) sy.peer = str_of(*peer, "addr");
    auto pid = int_of(*peer, "pid");
    if (pid && *pid >= 0) sy.pid = pid;
    auto devs = peer->find("cuda_devs");
    if (devs != peer->end() && devs->is_array() && devs->size() == 1 &&
        (*devs)[0].is_number_integer()) {
      const int64_t d = (*devs)[0].get<int64_t>();
      if (d >= 0 && d < 1024) sy.local_rank = static_cast<int>(d);
    }
  }
  sy.text = "ras: " + event + " " + (sy.node.empty() ? sy.peer : sy.node);
  out.push_back(std::move(sy));
}

}  // namespace faultline::runner::incident_internal
