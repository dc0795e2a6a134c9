// Hand-made report.json objects and run data for the report writer tests.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "reports/run_data.h"

namespace faultline::reports::testing {

// A faultline.report/v2 report of scenario `name` on ftccl with three faults:
//  f1 link_down host 1 rail 0, applied 2.0 s, reverted 3.0 s; detection 12.5 ms,
//     failover 40 ms, recovery 600 ms;
//  f2 bandwidth host 0 rail 1, applied 5.0 s, never reverted; recovery null, degraded 0.5;
//  f3 rank_pause, scheduled 6.0 s, never applied (no error recorded).
// Expectations: outcome survived (pass), wrong_results max 0 (pass), stall_ms max 500
// (value 812.25: fails).
nlohmann::json Report(const std::string& name = "rail-flap");

// The report with every expectation passing.
nlohmann::json PassingReport(const std::string& name = "rail-flap");

// Run data around Report(): 100 collectives over 0..8 s at 10 Gbit/s, 5 in the first fault,
// path events on rail 0 for ranks 0 and 1, and a scenario text.
RunData Run(const nlohmann::json& report);

// rails.csv of Run(): hosts 0 and 1 x rails 0 and 1 sampled every 20 ms from -0.1 s to 8 s;
// rail 0 carries 0.8 Gbit/s each way, except on host 1 during f1 (2.0..3.0 s: 0); rail 1
// carries 0; host 0 rail 0's tx cells over [3.98, 4.10] s are empty (no rate).
std::string RailsCsv();

// per_fault[].rails for Report()'s f1, as faultline run writes it.
nlohmann::json F1Rails();

// Parses `xml` with libxml2; empty string when well-formed, else the parser's message.
std::string XmlError(const std::string& xml);

// An element of a document parsed by libxml2 (text: the concatenated text of its children).
struct XmlNode {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::string text;
  std::vector<XmlNode> children;
  std::vector<const XmlNode*> All(const std::string& element) const;  // descendants, in order
  std::string Attr(const std::string& key) const;  // "" when absent
};
std::optional<XmlNode> ParseXml(const std::string& xml);

// The substring of `html` from `<svg id="ID"` to its closing `</svg>`; "" when absent.
std::string SvgById(const std::string& html, const std::string& id);

// Number of elements named `element` with class attribute `cls` (exact) in `xml`, counted by
// libxml2 on the parsed document. -1 when `xml` is not well-formed.
int CountByClass(const std::string& xml, const std::string& element, const std::string& cls);

}  // namespace faultline::reports::testing
