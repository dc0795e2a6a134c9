#include "reports/text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "reports/metric_table.h"

namespace faultline::reports {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid UTF-8 sequence at s[i] and its code point; 0 when invalid.
size_t Utf8Sequence(std::string_view s, size_t i, uint32_t* cp) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  size_t n;
  uint32_t min;
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  } else if ((b0 & 0xE0) == 0xC0) {
    n = 2, *cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3, *cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4, *cp = b0 & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    *cp = (*cp << 6) | (b & 0x3F);
  }
  if (*cp < min || *cp > 0x10FFFF || (*cp >= 0xD800 && *cp <= 0xDFFF)) return 0;
  return n;
}

std::string Escape(std::string_view s, bool attribute) {
  std::string out;
  out.reserve(s.size() + 16);
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    const size_t n = Utf8Sequence(s, i, &cp);
    if (n == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    switch (cp) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      case '\t': out += attribute ? "&#9;" : "\t"; break;
      case '\n': out += attribute ? "&#10;" : "\n"; break;
      case '\r': out += "&#13;"; break;
      default:
        if (cp < 0x20 || cp == 0xFFFE || cp == 0xFFFF) {
          out += kReplacement;
        } else {
          out.append(s.substr(i, n));
        }
    }
    i += n;
  }
  return out;
}

}  // namespace

std::string XmlEscape(std::string_view s) { return Escape(s, /*attribute=*/true); }
std::string XmlText(std::string_view s) { return Escape(s, /*attribute=*/false); }

std::string MarkdownCell(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '|': out += "\\|"; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += ' '; break;
      case '\r': break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string FormatNumber(double v, int digits) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

std::string FormatValue(const nlohmann::json& v, int digits) {
  if (v.is_null()) return "null";
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  if (v.is_number_float()) return FormatNumber(v.get<double>(), digits);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  return v.dump();
}

std::string FormatLimit(const nlohmann::json& limit) {
  if (!limit.is_object()) return FormatValue(limit);
  std::string out;
  for (const auto& [k, v] : limit.items()) {
    if (!out.empty()) out += ", ";
    out += k + " " + FormatValue(v);
  }
  return out;
}

std::string FormatTarget(const nlohmann::json& target) {
  if (!target.is_object()) return FormatValue(target);
  std::string out;
  auto add = [&](const char* key) {
    if (target.contains(key) && !target[key].is_null()) {
      if (!out.empty()) out += " ";
      out += std::string(key) + " " + FormatValue(target[key]);
    }
  };
  add("host");
  add("rail");
  add("rank");
  if (target.contains("side") && target["side"].is_string()) {
    out += " (" + target["side"].get<std::string>() + ")";
  }
  for (const auto& [k, v] : target.items()) {
    if (k != "host" && k != "rail" && k != "rank" && k != "side" && !v.is_null()) {
      out += " " + k + " " + FormatValue(v);
    }
  }
  return out;
}

std::string FormatCycles(const nlohmann::json& fault) {
  if (!fault.is_object() || !fault.contains("cycles") || !fault["cycles"].is_array() ||
      fault["cycles"].empty()) {
    return "";
  }
  const nlohmann::json& cycles = fault["cycles"];
  auto at = [](const nlohmann::json& c, const char* key) {
    return c.is_object() ? NumberOf(c.value(key, nlohmann::json())) : std::nullopt;
  };
  std::vector<double> downs, ups, late;
  size_t not_applied = 0, healed = 0;
  for (size_t i = 0; i < cycles.size(); ++i) {
    const nlohmann::json& c = cycles[i];
    const auto down = at(c, "down_s"), up = at(c, "up_s");
    const auto down_at = at(c, "down_scheduled_s"), up_at = at(c, "up_scheduled_s");
    if (!down) ++not_applied;
    if (down && !up) ++healed;
    if (down && up) downs.push_back((*up - *down) * 1e3);
    if (up && i + 1 < cycles.size()) {
      if (const auto next = at(cycles[i + 1], "down_s")) ups.push_back((*next - *up) * 1e3);
    }
    if (down && down_at) late.push_back((*down - *down_at) * 1e3);
    if (up && up_at) late.push_back((*up - *up_at) * 1e3);
  }
  auto spread = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    const double median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    return FormatNumber(median, 1) + " ms (" + FormatNumber(v.front(), 1) + " to " +
           FormatNumber(v.back(), 1) + ")";
  };
  std::string out =
      std::to_string(cycles.size()) + (cycles.size() == 1 ? " cycle" : " cycles") + " played";
  std::vector<std::string> parts;
  if (!downs.empty()) parts.push_back("down " + spread(downs));
  if (!ups.empty()) parts.push_back("up " + spread(ups));
  if (!parts.empty()) {
    out += ": " + parts[0];
    for (size_t i = 1; i < parts.size(); ++i) out += ", " + parts[i];
    out += ", median (min to max)";
  }
  if (!late.empty()) {
    out += "; the latest transition " +
           FormatNumber(*std::max_element(late.begin(), late.end()), 1) + " ms after its time";
  }
  if (not_applied > 0) out += "; " + std::to_string(not_applied) + " down(s) not applied";
  if (healed > 0) out += "; " + std::to_string(healed) + " up(s) left to the final heal";
  return out;
}

std::optional<double> NumberOf(const nlohmann::json& v) {
  if (!v.is_number()) return std::nullopt;
  return v.get<double>();
}

std::vector<std::pair<std::string, std::string>> TrainingFacts(const nlohmann::json& r) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!r.contains("workload") || !r["workload"].is_object()) return out;
  const nlohmann::json& w = r["workload"];
  const nlohmann::json m = r.value("metrics", nlohmann::json::object());
  auto get = [](const nlohmann::json& o, const char* k) {
    return o.is_object() && o.contains(k) ? o[k] : nlohmann::json();
  };
  const bool train = get(w, "kind") == "train";
  if (train) {
    out.emplace_back("workload", "train (batch " + FormatValue(get(w, "batch")) + " per rank, " +
                                     FormatValue(get(w, "compute_ms")) + " ms compute, " +
                                     FormatValue(get(w, "grad_bytes")) + " gradient bytes)");
  } else {
    out.emplace_back("workload", FormatValue(get(w, "kind")) + " (" + FormatValue(get(w, "script")) + ")");
  }
  out.emplace_back("training steps", FormatValue(get(m, kStepsCompleted)) + " of " +
                                         FormatValue(get(w, "steps")) + " completed");
  if (train) {
    const nlohmann::json t = r.value("train", nlohmann::json::object());
    const nlohmann::json twin = get(t, "twin");
    out.emplace_back("goodput ratio",
                     FormatValue(get(m, kGoodputRatio), 4) +
                         (get(twin, "self") == true ? " (a fault-free run is its own twin)"
                          : get(twin, "samples_per_s").is_number()
                              ? " (" + FormatValue(get(t, "samples_per_s")) + " useful samples/s vs the " +
                                    "fault-free twin's " + FormatValue(get(twin, "samples_per_s")) + ")"
                              : " (" + FormatValue(get(twin, "error")) + ")"));
    out.emplace_back("useful samples", FormatValue(get(t, "useful_samples")) + " in " +
                                           FormatValue(get(t, "job_time_s"), 3) + " s");
    out.emplace_back("restarts", FormatValue(get(r, "restarts")));
    const nlohmann::json decisions = get(t, "decisions");
    if (decisions.is_array() && !decisions.empty()) {
      std::string text;
      for (const auto& d : decisions) {
        text += (text.empty() ? "" : "; ") + FormatValue(get(d, "chosen")) + " at " +
                FormatValue(get(d, "t_s"), 3) + " s (" + FormatValue(get(d, "fault_class")) + ")";
      }
      out.emplace_back("policy decisions", text + "; p99 latency " +
                                               FormatValue(get(t, "decision_latency_ms_p99"), 4) + " ms");
    }
  }
  out.emplace_back("steps/s", FormatValue(get(m, kStepsPerS)));
  const nlohmann::json sha = get(m, kParamSha256);
  std::string sha_text;
  if (sha.is_string()) {
    sha_text = sha.get<std::string>();
  } else if (get(m, kParamSha256Agree) == false) {
    sha_text = "replicas differ";
  } else {
    sha_text = "none (no rank finished training)";
  }
  out.emplace_back("parameters sha256", sha_text);
  out.emplace_back("final loss", FormatValue(get(m, kFinalLoss), 6));
  return out;
}

}  // namespace faultline::reports
