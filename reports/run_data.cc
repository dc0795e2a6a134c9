#include "reports/run_data.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace faultline::reports {
namespace {

namespace fs = std::filesystem;

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out.push_back(line);
    pos = nl + 1;
  }
  return out;
}

std::vector<std::string_view> Split(std::string_view line, char sep) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (true) {
    const size_t at = line.find(sep, pos);
    out.push_back(line.substr(pos, at == std::string_view::npos ? std::string_view::npos : at - pos));
    if (at == std::string_view::npos) break;
    pos = at + 1;
  }
  return out;
}

template <typename T>
bool ParseField(std::string_view s, T* out) {
  const auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

Result<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open " + path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Internal("reading " + path.string() + " failed");
  return ss.str();
}

}  // namespace

Result<std::vector<SeriesPoint>> ParseTimeseriesCsv(std::string_view text) {
  static constexpr std::string_view kHeader = "index,start_s,end_s,duration_ms,bytes,busbw_gbps";
  std::vector<std::string_view> lines = Lines(text);
  if (lines.empty() || lines[0] != kHeader) {
    return InvalidArgument("timeseries.csv: line 1: expected the header \"" +
                           std::string(kHeader) + "\"");
  }
  std::vector<SeriesPoint> out;
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    std::vector<std::string_view> f = Split(lines[i], ',');
    SeriesPoint p;
    if (f.size() != 6 || !ParseField(f[0], &p.index) || !ParseField(f[1], &p.start_s) ||
        !ParseField(f[2], &p.end_s) || !ParseField(f[3], &p.duration_ms) ||
        !ParseField(f[4], &p.bytes) || !ParseField(f[5], &p.busbw_gbps)) {
      return InvalidArgument("timeseries.csv: line " + std::to_string(i + 1) +
                             ": expected 6 numbers, got \"" + std::string(lines[i]) + "\"");
    }
    out.push_back(p);
  }
  return out;
}

Result<RailsTable> ParseRailsCsv(std::string_view text) {
  std::vector<std::string_view> lines = Lines(text);
  if (lines.empty() || Split(lines[0], ',')[0] != "t_s") {
    return InvalidArgument("rails.csv: line 1: expected a header starting with \"t_s\"");
  }
  RailsTable out;
  const std::vector<std::string_view> header = Split(lines[0], ',');
  for (size_t c = 1; c < header.size(); ++c) {
    RailColumn col;
    col.name = std::string(header[c]);
    std::string_view rest = header[c];
    auto number = [&](char tag, int* v) {
      if (rest.empty() || rest[0] != tag) return false;
      rest.remove_prefix(1);
      const size_t end = rest.find('_');
      if (end == std::string_view::npos || !ParseField(rest.substr(0, end), v)) return false;
      rest.remove_prefix(end + 1);
      return true;
    };
    int host = 0, rank = 0, rail = 0;
    bool ok = number('h', &host);
    if (ok && !rest.empty() && rest[0] == 'n') {
      ok = number('n', &rank);
      col.rank = rank;
    }
    ok = ok && number('r', &rail);
    if (ok && rest.substr(0, 5) == "rdma_") {
      col.rdma = true;
      rest.remove_prefix(5);
    }
    if (ok && (rest == "tx_gbps" || rest == "rx_gbps")) {
      col.tx = rest == "tx_gbps";
    } else {
      return InvalidArgument("rails.csv: line 1: column \"" + col.name +
                             "\" is not h<h>[_n<l>]_r<r>_[rdma_](tx|rx)_gbps");
    }
    col.host = host;
    col.rail = rail;
    out.columns.push_back(std::move(col));
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    std::vector<std::string_view> f = Split(lines[i], ',');
    double t = 0;
    if (f.size() != header.size() || !ParseField(f[0], &t)) {
      return InvalidArgument("rails.csv: line " + std::to_string(i + 1) + ": expected " +
                             std::to_string(header.size()) + " cells and a time, got \"" +
                             std::string(lines[i]) + "\"");
    }
    out.t_s.push_back(t);
    for (size_t c = 1; c < f.size(); ++c) {
      double v = 0;
      if (f[c].empty()) {
        out.columns[c - 1].values.push_back(std::nullopt);
      } else if (ParseField(f[c], &v)) {
        out.columns[c - 1].values.push_back(v);
      } else {
        return InvalidArgument("rails.csv: line " + std::to_string(i + 1) + ": cell " +
                               std::to_string(c + 1) + " is not a number");
      }
    }
  }
  return out;
}

Result<std::vector<EventRow>> ParseEventsJsonl(std::string_view text) {
  std::vector<std::string_view> lines = Lines(text);
  std::vector<EventRow> out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    nlohmann::json j = nlohmann::json::parse(lines[i], nullptr, /*allow_exceptions=*/false);
    const bool last = i + 1 == lines.size() || (i + 2 == lines.size() && lines[i + 1].empty());
    if (j.is_discarded()) {
      if (last && text.back() != '\n') break;  // cut off mid-line
      return InvalidArgument("events.jsonl: line " + std::to_string(i + 1) + ": not JSON");
    }
    if (!j.is_object() || !j.contains("type") || j["type"] != "ccl_event") continue;
    if (!j.contains("t_s") || !j["t_s"].is_number() || !j.contains("kind") ||
        !j["kind"].is_string()) {
      return InvalidArgument("events.jsonl: line " + std::to_string(i + 1) +
                             ": a ccl_event needs t_s and kind");
    }
    EventRow e;
    e.t_s = j["t_s"].get<double>();
    e.kind = j["kind"].get<std::string>();
    if (j.contains("rank") && j["rank"].is_number_integer()) e.rank = j["rank"].get<int>();
    if (j.contains("path") && j["path"].is_number_integer()) e.path = j["path"].get<int>();
    if (j.contains("reason") && j["reason"].is_string()) e.reason = j["reason"].get<std::string>();
    out.push_back(std::move(e));
  }
  return out;
}

Status CheckReport(const nlohmann::json& report) {
  if (!report.is_object()) return InvalidArgument("report.json is not a JSON object");
  const nlohmann::json schema = report.value("schema", nlohmann::json());
  if (!schema.is_string() || !IsKnownReportSchema(schema.get<std::string>())) {
    std::string known;
    for (std::string_view s : kKnownReportSchemas) {
      known += (known.empty() ? "\"" : ", \"") + std::string(s) + "\"";
    }
    const std::string got = schema.is_null() ? "missing" : schema.dump();
    return InvalidArgument("report.json: schema " + got + ", expected one of " + known);
  }
  struct Key {
    const char* name;
    nlohmann::json::value_t type;
  };
  for (const Key& k : {Key{"scenario", nlohmann::json::value_t::object},
                       Key{"outcome", nlohmann::json::value_t::string},
                       Key{"faults", nlohmann::json::value_t::array},
                       Key{"metrics", nlohmann::json::value_t::object},
                       Key{"per_fault", nlohmann::json::value_t::array},
                       Key{"expectations", nlohmann::json::value_t::array}}) {
    if (!report.contains(k.name) || report[k.name].type() != k.type) {
      return InvalidArgument(std::string("report.json: \"") + k.name + "\" is missing or has the wrong type");
    }
  }
  if (!report["scenario"].contains("name") || !report["scenario"]["name"].is_string()) {
    return InvalidArgument("report.json: scenario.name is missing");
  }
  // Every reader of an expectation (verdict, junit, html, markdown) takes "pass" as a bool.
  for (const auto& e : report["expectations"]) {
    if (!e.is_object() || !e.contains("pass") || !e["pass"].is_boolean()) {
      return InvalidArgument("report.json: an expectation is not an object with a boolean \"pass\"");
    }
  }
  return Status::Ok();
}

Result<nlohmann::json> ParseReport(std::string_view text, const std::string& dir) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument(dir + "/report.json: not valid JSON");
  FL_RETURN_IF_ERROR(CheckReport(j).WithContext(dir));
  return j;
}

Result<RunData> LoadRunDir(const std::string& dir) {
  const fs::path root(dir);
  RunData run;
  auto text = ReadFile(root / "report.json");
  if (!text.ok()) return text.status().WithContext("run directory " + dir);
  FL_ASSIGN_OR_RETURN(run.report, ParseReport(*text, dir));

  auto csv = ReadFile(root / "timeseries.csv");
  if (csv.ok()) {
    auto series = ParseTimeseriesCsv(*csv);
    if (series.ok()) {
      run.series = std::move(*series);
    } else {
      run.notes.push_back(series.status().message());
    }
  } else {
    run.notes.push_back("timeseries.csv is missing");
  }
  auto events = ReadFile(root / "events.jsonl");
  if (events.ok()) {
    auto rows = ParseEventsJsonl(*events);
    if (rows.ok()) {
      run.events = std::move(*rows);
    } else {
      run.notes.push_back(rows.status().message());
    }
  } else {
    run.notes.push_back("events.jsonl is missing");
  }
  auto scenario = ReadFile(root / "scenario.yaml");
  if (scenario.ok()) {
    run.scenario_text = std::move(*scenario);
  } else {
    run.notes.push_back("scenario.yaml is missing");
  }
  const nlohmann::json files = run.report.value("files", nlohmann::json::object());
  const bool named = files.is_object() && files.value("rails", nlohmann::json()).is_string();
  auto rails = ReadFile(root / "rails.csv");
  if (rails.ok()) {
    auto table = ParseRailsCsv(*rails);
    if (table.ok()) {
      run.rails = std::move(*table);
    } else {
      run.notes.push_back(table.status().message());
    }
  } else if (named) {
    run.notes.push_back("rails.csv is missing");
  }
  return run;
}

Result<std::vector<std::string>> FindRunDirs(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return NotFound(path + ": not a directory");
  if (fs::is_regular_file(fs::path(path) / "report.json", ec)) return std::vector<std::string>{path};
  std::vector<std::string> out;
  fs::recursive_directory_iterator it(path, fs::directory_options::skip_permission_denied, ec);
  if (ec) return NotFound(path + ": " + ec.message());
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (it->is_directory(ec) && fs::is_regular_file(it->path() / "report.json", ec)) {
      out.push_back(it->path().string());
      it.disable_recursion_pending();  // a run directory's ranks/ hold no runs
    }
  }
  if (out.empty()) return NotFound(path + ": no report.json in it or below it");
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace faultline::reports
