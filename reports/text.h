// Text helpers shared by the report writers: escaping for XML/HTML and Markdown, and the one
// way numbers and limits are printed. Pure; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>
#include <string_view>

namespace faultline::reports {

// Escapes &, <, >, " and ' for XML 1.0 text and attribute values. Tab, newline and carriage
// return become character references (so attribute values keep them); every other character
// that XML 1.0 cannot carry (C0 controls, U+FFFE/U+FFFF, bytes that are not UTF-8) becomes
// U+FFFD. The result is always well-formed UTF-8.
std::string XmlEscape(std::string_view s);

// The same for element text, where tab and newline stay as they are (readable <pre> blocks).
std::string XmlText(std::string_view s);

// HTML text and attribute values take the same escaping.
inline std::string HtmlEscape(std::string_view s) { return XmlEscape(s); }
inline std::string HtmlText(std::string_view s) { return XmlText(s); }

// Escapes a Markdown table cell: `|` and backslash are escaped, newlines become spaces, and
// HTML-significant characters are escaped so a pasted ticket renders them literally.
std::string MarkdownCell(std::string_view s);

// A number with up to `digits` significant decimals, without trailing zeros ("812.3",
// "0.912", "12"); "null" for a JSON null, the JSON text for anything else.
std::string FormatValue(const nlohmann::json& v, int digits = 3);
std::string FormatNumber(double v, int digits = 3);

// A limit as a reader says it: {"max": 500} -> "max 500"; {"pct": 90, "within_ms": 1000}
// -> "pct 90, within_ms 1000"; "survived" -> "survived".
std::string FormatLimit(const nlohmann::json& limit);

// A fault target {"host":1,"rail":0,"side":"switch","rank":3} -> "host 1 rail 0 (switch) rank 3".
std::string FormatTarget(const nlohmann::json& target);

// A report.json fault's `cycles` (link_flap) as played: "60 cycles played: down 270 ms (266 to
// 281), up 140 ms (131 to 152), median (min to max); the latest transition 1.2 ms after its
// time". What could not be measured is said so (a down never applied, an up the heal did). ""
// for a fault without cycles.
std::string FormatCycles(const nlohmann::json& fault);

// The number in `v` when it is one.
std::optional<double> NumberOf(const nlohmann::json& v);

// A training workload's rows for the run table (label, text): workload, steps, steps/s, the
// parameters' hash, final loss. Empty for a report without a "workload" object.
std::vector<std::pair<std::string, std::string>> TrainingFacts(const nlohmann::json& report);

}  // namespace faultline::reports
