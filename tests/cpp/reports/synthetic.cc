#include "synthetic.h"

#include <cstdio>

#include <libxml/parser.h>
#include <libxml/tree.h>


namespace faultline::reports::testing {

nlohmann::json Report(const std::string& name) {
  nlohmann::json metrics_null = {{"baseline_busbw_gbps", nullptr}, {"stall_ms", nullptr},
                                 {"detection_ms", nullptr},        {"failover_latency_ms", nullptr},
                                 {"recovery_ms", nullptr},         {"degraded_ratio", nullptr},
                                 {"goodput_loss_pct", nullptr}};
  nlohmann::json f1 = metrics_null;
  f1.update({{"id", "f1"}, {"baseline_busbw_gbps", 10.0}, {"stall_ms", 812.25},
             {"detection_ms", 12.5}, {"failover_latency_ms", 40.0}, {"recovery_ms", 600.0},
             {"goodput_loss_pct", 30.5}});
  nlohmann::json f2 = metrics_null;
  f2.update({{"id", "f2"}, {"baseline_busbw_gbps", 10.0}, {"stall_ms", 0.0},
             {"degraded_ratio", 0.5}, {"goodput_loss_pct", 50.0}});
  nlohmann::json f3 = metrics_null;
  f3["id"] = "f3";
  return {
      {"schema", "faultline.report/v2"},
      {"scenario",
       {{"name", name}, {"file", "scenarios/x.yaml"}, {"sha256", std::string(64, 'a')}, {"seed", 42}}},
      {"environment",
       {{"kernel", "Linux 6.1.0"},
        {"machine", "x86_64"},
        {"versions", {{"faultline", "0.1.0"}}},
        {"knobs", {{"op_timeout_ms", 10000}, {"rail_gbps", 1.0}}},
        {"topology",
         {{"hosts", {{{"rails", {{{"dev", "r0"}}, {{"dev", "r1"}}}}}, {{"rails", {{{"dev", "r0"}}, {{"dev", "r1"}}}}}}}}}}},
      {"ccl", "ftccl"},
      {"outcome", "survived"},
      {"correctness", {{"checked", true}, {"wrong", 0}}},
      {"faults",
       {{{"id", "f1"}, {"type", "link_down"}, {"target", {{"host", 1}, {"rail", 0}, {"side", "host"}}},
         {"scheduled_s", 2.0}, {"applied_s", 2.0}, {"reverted_s", 3.0}, {"observed", "down"}},
        {{"id", "f2"}, {"type", "bandwidth"}, {"target", {{"host", 0}, {"rail", 1}}},
         {"scheduled_s", 5.0}, {"applied_s", 5.0}, {"reverted_s", nullptr}, {"observed", nullptr}},
        {{"id", "f3"}, {"type", "rank_pause"}, {"target", {{"host", 0}, {"rank", 1}}},
         {"scheduled_s", 6.0}, {"applied_s", nullptr}, {"reverted_s", nullptr}, {"observed", nullptr}}}},
      {"metrics",
       {{"baseline_busbw_gbps", 10.0}, {"stall_ms", 812.25}, {"detection_ms", 12.5},
        {"failover_latency_ms", 40.0}, {"recovery_ms", nullptr}, {"degraded_ratio", 0.5},
        {"goodput_loss_pct", 50.0}}},
      {"per_fault", {f1, f2, f3}},
      {"expectations",
       {{{"name", "outcome"}, {"limit", "survived"}, {"value", "survived"}, {"pass", true}},
        {{"name", "wrong_results"}, {"limit", {{"max", 0}}}, {"value", 0}, {"pass", true}},
        {{"name", "stall_ms"}, {"limit", {{"max", 500.0}}}, {"value", 812.25}, {"pass", false}}}},
      {"files", {{"timeseries", "timeseries.csv"}, {"events", "events.jsonl"}, {"junit", nullptr}, {"html", nullptr}}},
  };
}

nlohmann::json PassingReport(const std::string& name) {
  nlohmann::json r = Report(name);
  r["expectations"][2] = {{"name", "stall_ms"}, {"limit", {{"max", 1000.0}}}, {"value", 812.25}, {"pass", true}};
  return r;
}

RunData Run(const nlohmann::json& report) {
  RunData run;
  run.report = report;
  for (int i = 0; i < 100; ++i) {
    SeriesPoint p;
    p.index = i;
    p.start_s = i * 0.08;
    p.end_s = (i + 1) * 0.08;
    p.duration_ms = 80;
    p.bytes = 1 << 20;
    p.busbw_gbps = (p.start_s >= 2.0 && p.end_s <= 3.0) ? 5.0 : 10.0;
    run.series.push_back(p);
  }
  run.events = {{2.01, 0, "path_down", 0, "no ack"}, {2.02, 1, "path_down", 0, "no ack"},
                {2.04, 0, "resumed", 1, ""},          {3.1, 0, "path_up", 0, ""},
                {3.2, 1, "failback", 0, ""}};
  run.scenario_text = "name: rail-flap\nfaults: [] # <b>&</b>\n";
  return run;
}

std::string RailsCsv() {
  std::string out = "t_s";
  for (int h = 0; h < 2; ++h) {
    for (int r = 0; r < 2; ++r) {
      std::string pre = "h";
      pre.append(std::to_string(h)).append("_r").append(std::to_string(r));
      out += "," + pre + "_tx_gbps," + pre + "_rx_gbps";
    }
  }
  out += "\n";
  for (int i = -4; i <= 400; ++i) {
    const double t = i * 0.02;
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.6f", t);
    out += buf;
    for (int h = 0; h < 2; ++h) {
      const bool down = h == 1 && t > 2.0 && t <= 3.0;
      const char* r0 = down ? "0.000000" : "0.800000";
      // Host 0's rail-0 tx has no rate over [3.98, 4.10] s: a whole 100 ms bin of the plot.
      out += (h == 0 && i >= 199 && i <= 205) ? std::string(",") : std::string(",") + r0;
      out += std::string(",") + r0 + ",0.000000,0.000000";
    }
    out += "\n";
  }
  return out;
}

nlohmann::json F1Rails() {
  nlohmann::json out = nlohmann::json::array();
  for (int h = 0; h < 2; ++h) {
    for (int r = 0; r < 2; ++r) {
      const double level = r == 0 ? 0.8 : 0.0;
      out.push_back({{"host", h},
                     {"rail", r},
                     {"before_gbps", level},
                     {"during_gbps", h == 1 ? 0.0 : level},
                     {"after_gbps", level}});
    }
  }
  return out;
}

std::string XmlError(const std::string& xml) {
  xmlDocPtr doc = xmlReadMemory(xml.data(), static_cast<int>(xml.size()), "in.xml", nullptr,
                                XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
  if (doc == nullptr) {
    const xmlError* e = xmlGetLastError();
    return e && e->message ? e->message : "not well-formed";
  }
  xmlFreeDoc(doc);
  return "";
}

namespace {

XmlNode Convert(xmlNodePtr node) {
  XmlNode out;
  out.name = reinterpret_cast<const char*>(node->name);
  for (xmlAttrPtr a = node->properties; a != nullptr; a = a->next) {
    xmlChar* v = xmlNodeListGetString(node->doc, a->children, 1);
    out.attrs[reinterpret_cast<const char*>(a->name)] = v ? reinterpret_cast<const char*>(v) : "";
    xmlFree(v);
  }
  for (xmlNodePtr c = node->children; c != nullptr; c = c->next) {
    if (c->type == XML_ELEMENT_NODE) {
      out.children.push_back(Convert(c));
    } else if (c->type == XML_TEXT_NODE || c->type == XML_CDATA_SECTION_NODE) {
      out.text += reinterpret_cast<const char*>(c->content);
    }
  }
  return out;
}

void Collect(const XmlNode& n, const std::string& element, std::vector<const XmlNode*>* out) {
  for (const auto& c : n.children) {
    if (c.name == element) out->push_back(&c);
    Collect(c, element, out);
  }
}

}  // namespace

std::vector<const XmlNode*> XmlNode::All(const std::string& element) const {
  std::vector<const XmlNode*> out;
  Collect(*this, element, &out);
  return out;
}

std::string XmlNode::Attr(const std::string& key) const {
  auto it = attrs.find(key);
  return it == attrs.end() ? "" : it->second;
}

std::optional<XmlNode> ParseXml(const std::string& xml) {
  xmlDocPtr doc = xmlReadMemory(xml.data(), static_cast<int>(xml.size()), "in.xml", nullptr,
                                XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
  if (doc == nullptr) return std::nullopt;
  XmlNode root = Convert(xmlDocGetRootElement(doc));
  xmlFreeDoc(doc);
  return root;
}

std::string SvgById(const std::string& html, const std::string& id) {
  const size_t from = html.find("<svg id=\"" + id + "\"");
  if (from == std::string::npos) return "";
  const size_t to = html.find("</svg>", from);
  if (to == std::string::npos) return "";
  return html.substr(from, to + 6 - from);
}

int CountByClass(const std::string& xml, const std::string& element, const std::string& cls) {
  auto root = ParseXml(xml);
  if (!root) return -1;
  int n = root->name == element && root->Attr("class") == cls;
  for (const XmlNode* e : root->All(element)) n += e->Attr("class") == cls;
  return n;
}

}  // namespace faultline::reports::testing
