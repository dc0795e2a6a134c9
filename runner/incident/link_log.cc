#include "runner/incident/link_log.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <ctime>
#include <map>
#include <regex>

#include "runner/incident/log_lines.h"

namespace faultline::runner {

// The sources, one file each (log_lines.h).
using incident_internal::Re;
using incident_internal::AscTimeNs;
using incident_internal::ToInt;
using incident_internal::Stamps;
using incident_internal::Strip;
using incident_internal::Unreadable;
using incident_internal::KernelEvent;
using incident_internal::IpMonitorEvent;
using incident_internal::SwitchEvent;
using incident_internal::RdmaEvent;
using incident_internal::IbstatState;
using incident_internal::StampLine;
using incident_internal::SymptomOf;
using incident_internal::RasSymptoms;

const char* LinkSourceName(LinkSource s) {
  switch (s) {
    case LinkSource::kKernel:
      return "kernel";
    case LinkSource::kIpMonitor:
      return "ip_monitor";
    case LinkSource::kRdmaPort:
      return "rdma_port";
    case LinkSource::kSwitch:
      return "switch";
  }
  return "kernel";
}

std::vector<LinkEvent> ParseLinkLog(std::string_view text, const std::string& file) {
  return ParseIncidentLog(text, file).links;
}

namespace {

constexpr size_t kMaxLine = 8192;        // longer lines are not log lines of any source here
constexpr size_t kMaxJsonBytes = 4 << 20;
constexpr int kMaxJsonDepth = 32;

// The parse of one log: the state that spans lines.
class Parser {
 public:
  Parser(const std::string& file, const std::string& node, int year)
      : file_(file), node_(node), year_(year) {}

  void Line(std::string raw, int lineno) {
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();
    if (json_start_) {
      // ncclras indents everything inside its documents: a line at column 0 other than the
      // closing brace ends a document that never closed, and is read as itself.
      if (!raw.empty() && raw[0] != ' ' && raw[0] != '\t' && raw[0] != '}' && raw[0] != ']') {
        Warn(json_start_, "a JSON document that does not end (lines " +
                              std::to_string(json_start_) + "-" + std::to_string(lineno - 1) + ")");
        json_start_ = 0;
      } else {
        JsonLine(raw, lineno);
        return;
      }
    }
    if (raw.size() > kMaxLine) {
      Warn(lineno, "line longer than " + std::to_string(kMaxLine) + " bytes, skipped");
      return;
    }
    const size_t first = raw.find_first_not_of(" \t");
    if (first != std::string::npos && raw[first] == '{' &&
        raw.find_first_not_of(" \t", first + 1) == std::string::npos) {
      EndIbstatBlock();
      json_start_ = lineno;
      json_.clear();
      json_depth_ = 0;
      json_max_depth_ = 0;
      json_in_string_ = false;
      json_escape_ = false;
      JsonLine(raw, lineno);
      return;
    }
    std::smatch m;
    if (std::regex_search(raw, m,
                          Re(R"(^Timestamp: (\w{3} \w{3} +\d{1,2} \d\d:\d\d:\d\d \d{4}) (\d{1,6}) usec)"))) {
      ip_stamp_ = AscTimeNs(m[1]);
      if (ip_stamp_) *ip_stamp_ += std::stoll(m[2]) * 1000;
      return;
    }
    if (Ibstat(raw, lineno)) return;
    if (raw.empty() || raw[0] == ' ' || raw[0] == '\t') return;  // ip's continuation lines
    Stamps st = Strip(raw, year_);
    const std::string node = st.node.empty() ? node_ : st.node;
    if (st.kernel_s && st.wall_ns) {
      ClockSample c;
      c.file = file_;
      c.line = lineno;
      c.node = node;
      c.kernel_s = *st.kernel_s;
      c.wall_ns = *st.wall_ns;
      c.wall_res_ns = st.wall_res_ns;
      c.year_assumed = st.year_assumed;
      out_.clocks.push_back(std::move(c));
    }
    std::optional<Unreadable> bad;
    LinkSource source = LinkSource::kIpMonitor;
    auto ev = IpMonitorEvent(st.rest);
    if (ev) {
      if (!st.wall_ns && ip_stamp_) {
        st.wall_ns = ip_stamp_;
        st.wall_res_ns = 1000;
      }
    } else if ((ev = SwitchEvent(st.rest, bad))) {
      source = LinkSource::kSwitch;
    } else if (!bad && (ev = RdmaEvent(st.rest, bad))) {
      source = LinkSource::kRdmaPort;
    } else if (!bad && (ev = KernelEvent(st.rest))) {
      source = LinkSource::kKernel;
    }
    ip_stamp_.reset();
    if (ev && !ev->second.empty()) {
      LinkEvent e;
      e.file = file_;
      e.line = lineno;
      e.text = raw;
      e.node = node;
      e.names = ev->second;
      e.up = ev->first;
      e.source = source;
      e.kernel_s = st.kernel_s;
      e.wall_ns = st.wall_ns;
      e.wall_res_ns = st.wall_ns ? st.wall_res_ns : 0;
      e.year_assumed = st.wall_ns && st.year_assumed;
      out_.links.push_back(std::move(e));
      return;
    }
    if (bad) {
      Warn(lineno, bad->why);
      return;
    }
    auto sy = SymptomOf(raw, year_, bad);
    if (bad) {
      Warn(lineno, bad->why);
      return;
    }
    if (sy) {
      sy->file = file_;
      sy->line = lineno;
      sy->text = raw;
      if (sy->node.empty()) sy->node = node_;
      if (!sy->wall_ns) sy->wall_res_ns = 0;
      out_.symptoms.push_back(std::move(*sy));
    }
  }

  ParsedLog Finish(int last_line) {
    if (json_start_) {
      Warn(json_start_, "a JSON document that does not end (from line " +
                            std::to_string(json_start_) + " to the end, line " +
                            std::to_string(last_line) + ")");
      json_start_ = 0;
    }
    EndIbstatBlock();
    return std::move(out_);
  }

  void Warn(int line, std::string why) {
    out_.warnings.push_back(LogWarning{file_, line, std::move(why)});
  }

 private:
  void JsonLine(const std::string& raw, int lineno) {
    json_ += raw;
    json_ += '\n';
    for (char c : raw) {
      if (json_in_string_) {
        if (json_escape_) {
          json_escape_ = false;
        } else if (c == '\\') {
          json_escape_ = true;
        } else if (c == '"') {
          json_in_string_ = false;
        }
        continue;
      }
      if (c == '"') json_in_string_ = true;
      if (c == '{' || c == '[') json_max_depth_ = std::max(json_max_depth_, ++json_depth_);
      if (c == '}' || c == ']') --json_depth_;
    }
    if (json_.size() > kMaxJsonBytes) {
      Warn(json_start_, "a JSON document longer than " + std::to_string(kMaxJsonBytes) +
                            " bytes, skipped to line " + std::to_string(lineno));
      json_start_ = 0;
      return;
    }
    const bool top_close = raw == "}";  // ncclras closes its documents at column 0
    if ((json_depth_ > 0 || json_in_string_) && !top_close) return;
    const int start = json_start_;
    json_start_ = 0;
    if (json_depth_ != 0 || json_in_string_ || json_max_depth_ > kMaxJsonDepth) {
      Warn(start, "bad JSON (unbalanced or nested deeper than " + std::to_string(kMaxJsonDepth) +
                      ") in lines " + std::to_string(start) + "-" + std::to_string(lineno));
      return;
    }
    nlohmann::json doc = nlohmann::json::parse(json_, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded() || !doc.is_object()) {
      Warn(start, "bad JSON in lines " + std::to_string(start) + "-" + std::to_string(lineno));
      return;
    }
    if (!doc.contains("communicators") && !doc.contains("event")) return;  // not from ncclras
    Symptom base;
    base.file = file_;
    base.line = start;
    base.node = node_;
    std::vector<Symptom> found;
    RasSymptoms(doc, base, found);
    for (Symptom& sy : found) {
      if (sy.node.empty()) sy.node = node_;
      out_.symptoms.push_back(std::move(sy));
    }
  }

  // An ibstat line (or a dump's timestamp line); false for anything else.
  bool Ibstat(const std::string& raw, int lineno) {
    std::smatch m;
    if (auto stamp = StampLine(raw)) {
      EndIbstatBlock();
      ib_.stamp_ns = stamp->first;
      ib_.stamp_res_ns = stamp->second;
      return true;
    }
    if (std::regex_match(raw, m, Re(R"(^CA '([^']*)'\s*$)"))) {
      EndIbstatBlock();
      ib_.ca = m[1];
      ib_.ca_line = lineno;
      if (ib_.ca.empty()) {
        Warn(lineno, "an ibstat block without a device name");
        ib_.ca_line = 0;
      }
      return true;
    }
    if (ib_.ca.empty()) return false;
    if (raw.empty() || (raw[0] != ' ' && raw[0] != '\t')) {
      EndIbstatBlock();
      return false;
    }
    if (std::regex_match(raw, m, Re(R"(^\s+Port (\S+):\s*$)"))) {
      EndPort();
      if (!ToInt(m[1], 0, 255)) {
        Warn(lineno, "an ibstat port number out of range: " + m[1].str());
        ib_.port.clear();
        return true;
      }
      ib_.port = m[1];
      ib_.port_line = lineno;
      ib_.port_has_state = false;
      return true;
    }
    if (std::regex_match(raw, m, Re(R"(^\s+State:\s*(\S*)\s*$)"))) {
      if (ib_.port.empty()) return true;  // a CA-level line, or after a bad port
      ib_.port_has_state = true;
      std::string word = m[1];
      std::transform(word.begin(), word.end(), word.begin(), ::toupper);
      std::optional<bool> up;
      if (word == "ACTIVE") up = true;
      if (word == "DOWN" || word == "INITIALIZING" || word == "INIT" || word == "ARMED") up = false;
      if (!up) {
        Warn(lineno, "an ibstat port state that is not Active/Down/Initializing/Armed: '" +
                         m[1].str() + "'");
        return true;
      }
      const std::string key = ib_.ca + "/" + ib_.port;
      auto it = ib_.last.find(key);
      if (it != ib_.last.end() && it->second != *up) {
        LinkEvent e;
        e.file = file_;
        e.line = lineno;
        e.text = key + " State: " + m[1].str();
        e.node = node_;
        e.names = {key};
        e.up = *up;
        e.source = LinkSource::kRdmaPort;
        e.wall_ns = ib_.stamp_ns;
        e.wall_res_ns = ib_.stamp_ns ? ib_.stamp_res_ns : 0;
        out_.links.push_back(std::move(e));
      }
      ib_.last[key] = *up;
      return true;
    }
    return true;  // the other indented lines of a CA block
  }

  void EndPort() {
    if (!ib_.port.empty() && !ib_.port_has_state) {
      Warn(ib_.port_line, "ibstat port " + ib_.ca + "/" + ib_.port + " without a State line");
    }
    ib_.port.clear();
    ib_.port_has_state = false;
  }

  void EndIbstatBlock() {
    if (ib_.ca.empty()) return;
    EndPort();
    ib_.ca.clear();
  }

  const std::string& file_;
  const std::string& node_;
  const int year_;
  ParsedLog out_;
  std::optional<int64_t> ip_stamp_;  // from the last "Timestamp:" line of `ip -t monitor`
  IbstatState ib_;
  int json_start_ = 0;  // the first line of a JSON document being read; 0: none
  std::string json_;
  int json_depth_ = 0;
  int json_max_depth_ = 0;
  bool json_in_string_ = false;
  bool json_escape_ = false;
};

// A log without years in its stamps that runs over New Year: within one file and host, a
// year-less stamp more than half a year before the previous one is in the next year.
void RollOverYears(ParsedLog* log) {
  struct Stamp {
    int line;
    std::string node;
    int64_t* wall;
  };
  std::vector<Stamp> stamps;
  for (auto& e : log->links) {
    if (e.wall_ns && e.year_assumed) stamps.push_back({e.line, e.node, &*e.wall_ns});
  }
  for (auto& e : log->symptoms) {
    if (e.wall_ns && e.year_assumed) stamps.push_back({e.line, e.node, &*e.wall_ns});
  }
  for (auto& e : log->clocks) {
    if (e.year_assumed) stamps.push_back({e.line, e.node, &e.wall_ns});
  }
  std::stable_sort(stamps.begin(), stamps.end(),
                   [](const Stamp& x, const Stamp& y) { return x.line < y.line; });
  constexpr int64_t kHalfYearNs = 182LL * 86'400 * 1'000'000'000;
  std::map<std::string, std::pair<int64_t, int>> last;  // node -> (previous stamp, years added)
  for (Stamp& st : stamps) {
    auto [prev, years] = last.count(st.node) ? last[st.node] : std::make_pair(*st.wall, 0);
    auto shifted = [&](int add) {
      if (add == 0) return *st.wall;
      const std::time_t t = static_cast<std::time_t>(*st.wall / 1'000'000'000);
      std::tm tm{};
      if (!gmtime_r(&t, &tm)) return *st.wall;
      // Never past 2200 (the parsers' range, so that the time in ns fits an int64_t): a log
      // whose months go back and forth many times stops rolling there.
      if (tm.tm_year + add > 2200 - 1900) return *st.wall;
      tm.tm_year += add;
      return static_cast<int64_t>(timegm(&tm)) * 1'000'000'000 + *st.wall % 1'000'000'000;
    };
    int64_t now = shifted(years);
    if (now < prev - kHalfYearNs) now = shifted(++years);
    *st.wall = now;
    last[st.node] = {now, years};
  }
}

}  // namespace

ParsedLog ParseIncidentLog(std::string_view text, const std::string& file,
                           const std::string& node, int year) {
  Parser parser(file, node, year);
  int lineno = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    ++lineno;
    try {
      parser.Line(std::string(text.substr(pos, nl - pos)), lineno);
    } catch (const std::exception& e) {
      parser.Warn(lineno, std::string("unreadable line: ") + e.what());
    } catch (...) {
      parser.Warn(lineno, "unreadable line");
    }
    pos = nl + 1;
  }
  ParsedLog parsed = parser.Finish(lineno);
  RollOverYears(&parsed);
  return parsed;
}

}  // namespace faultline::runner

