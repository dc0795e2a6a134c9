#include "reports/run_files.h"

#include <cstdio>
#include <stdexcept>

namespace faultline::reports {
namespace {

void AppendFixed(std::string* out, const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  out->append(buf);
}

}  // namespace

std::string TimeseriesCsv(std::span<const SeriesPoint> series) {
  std::string out = "index,start_s,end_s,duration_ms,bytes,busbw_gbps\n";
  for (const SeriesPoint& p : series) {
    out.append(std::to_string(p.index)).append(",");
    AppendFixed(&out, "%.6f,", p.start_s);
    AppendFixed(&out, "%.6f,", p.end_s);
    AppendFixed(&out, "%.3f,", p.duration_ms);
    out.append(std::to_string(p.bytes)).append(",");
    AppendFixed(&out, "%.4f\n", p.busbw_gbps);
  }
  return out;
}

std::string RailColumnName(const RailColumn& c) {
  std::string name = "h";
  name.append(std::to_string(c.host));
  if (c.rank) name.append("_n").append(std::to_string(*c.rank));
  name.append("_r").append(std::to_string(c.rail)).append("_");
  if (c.rdma) name.append("rdma_");
  name.append(c.tx ? "tx" : "rx").append("_gbps");
  return name;
}

std::string RailsCsv(const RailsTable& table) {
  std::string out = "t_s";
  for (const RailColumn& c : table.columns) {
    if (c.values.size() != table.t_s.size()) {
      throw std::invalid_argument("rails.csv: column " + RailColumnName(c) + " has " +
                                  std::to_string(c.values.size()) + " values for " +
                                  std::to_string(table.t_s.size()) + " sample times");
    }
    out.append(",").append(RailColumnName(c));
  }
  out.append("\n");
  for (size_t i = 0; i < table.t_s.size(); ++i) {
    AppendFixed(&out, "%.6f", table.t_s[i]);
    for (const RailColumn& c : table.columns) {
      out.append(",");
      if (c.values[i]) AppendFixed(&out, "%.6f", *c.values[i]);
    }
    out.append("\n");
  }
  return out;
}

nlohmann::json CclEventJson(const EventRow& e) {
  return {{"type", "ccl_event"}, {"t_s", e.t_s},   {"rank", e.rank},
          {"kind", e.kind},      {"path", e.path}, {"reason", e.reason}};
}

std::string EventsJsonl(std::span<const nlohmann::json> lines) {
  std::string out;
  for (const nlohmann::json& j : lines) {
    if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
      throw std::invalid_argument("events.jsonl: a line is not an object with a string type: " +
                                  j.dump());
    }
    out.append(j.dump()).append("\n");
  }
  return out;
}

}  // namespace faultline::reports
