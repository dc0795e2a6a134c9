#include "runner/core/yaml_reader.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

#include "base/units.h"

namespace faultline::runner {
namespace {

int EditDistance(const std::string& a, const std::string& b) {
  std::vector<int> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      int sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

std::string SuggestHint(const std::string& got, const std::vector<std::string>& candidates) {
  int best = 1 << 30;
  std::string best_name;
  for (const auto& c : candidates) {
    int d = EditDistance(got, c);
    if (d < best) {
      best = d;
      best_name = c;
    }
  }
  if (!best_name.empty() && best <= std::max<int>(1, static_cast<int>(got.size()) / 3)) {
    return "did you mean '" + best_name + "'?";
  }
  return "expected one of: " + Join(candidates);
}

SourceLoc YamlReader::Loc(const YAML::Node& n) {
  YAML::Mark m = n.Mark();
  if (m.is_null()) return {};
  return {m.line + 1, m.column + 1};
}

std::string YamlReader::Describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Null:
      return "nothing";
    case YAML::NodeType::Scalar:
      return "'" + n.Scalar() + "'";
    default:
      return "an undefined value";
  }
}

void YamlReader::Error(SourceLoc loc, std::string message, std::string hint) {
  diags_.push_back({file_, loc, std::move(message), std::move(hint)});
}

void YamlReader::Error(const YAML::Node& n, std::string message, std::string hint) {
  Error(Loc(n), std::move(message), std::move(hint));
}

void YamlReader::CheckKeys(const YAML::Node& map, const std::vector<std::string>& allowed,
                           const std::string& what) {
  std::set<std::string> seen;
  for (auto it = map.begin(); it != map.end(); ++it) {
    const YAML::Node key = it->first;
    if (!key.IsScalar()) {
      Error(key, "a key in " + what + " must be a plain name", "");
      continue;
    }
    const std::string& k = key.Scalar();
    if (!seen.insert(k).second) {
      Error(key, "duplicate key '" + k + "' in " + what, "remove one of the two");
      continue;
    }
    if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
      Error(key, "unknown key '" + k + "' in " + what, SuggestHint(k, allowed));
    }
  }
}

bool YamlReader::ExpectMap(const YAML::Node& n, const std::string& what) {
  if (n.IsMap()) return true;
  Error(n, what + " must be a mapping, got " + Describe(n),
        "write it as 'key: value' lines or {key: value, ...}");
  return false;
}

bool YamlReader::Required(const YAML::Node& parent, const char* key, const std::string& what,
                          const std::string& hint) {
  if (parent[key]) return true;
  Error(parent, "missing required key '" + std::string(key) + "' in " + what, hint);
  return false;
}

std::optional<int64_t> YamlReader::Int(const YAML::Node& n, const std::string& what, int64_t lo,
                                       int64_t hi) {
  if (n.IsScalar()) {
    const std::string& s = n.Scalar();
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && end == s.c_str() + s.size() && errno == 0) {
      if (v < lo || v > hi) {
        Error(n, what + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                     "], got " + s);
        return std::nullopt;
      }
      return v;
    }
  }
  Error(n, what + " must be an integer, got " + Describe(n));
  return std::nullopt;
}

std::optional<double> YamlReader::Number(const YAML::Node& n, const std::string& what, double lo,
                                         double hi) {
  if (n.IsScalar()) {
    const std::string& s = n.Scalar();
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(v)) {
      if (v < lo || v > hi) {
        std::ostringstream os;
        os << what << " must be in [" << lo << ", " << hi << "], got " << s;
        Error(n, os.str());
        return std::nullopt;
      }
      return v;
    }
  }
  Error(n, what + " must be a number, got " + Describe(n));
  return std::nullopt;
}

std::optional<std::string> YamlReader::String(const YAML::Node& n, const std::string& what) {
  if (n.IsScalar()) return n.Scalar();
  Error(n, what + " must be a string, got " + Describe(n));
  return std::nullopt;
}

std::optional<bool> YamlReader::Bool(const YAML::Node& n, const std::string& what) {
  if (n.IsScalar()) {
    const std::string& s = n.Scalar();
    if (s == "true") return true;
    if (s == "false") return false;
  }
  Error(n, what + " must be true or false, got " + Describe(n));
  return std::nullopt;
}

std::optional<std::string> YamlReader::Choice(const YAML::Node& n, const std::string& what,
                                              const std::vector<std::string>& choices) {
  auto s = String(n, what);
  if (!s) return std::nullopt;
  if (std::find(choices.begin(), choices.end(), *s) == choices.end()) {
    Error(n, "unknown " + what + " '" + *s + "'", SuggestHint(*s, choices));
    return std::nullopt;
  }
  return s;
}

std::optional<int64_t> YamlReader::Duration(const YAML::Node& n, const std::string& what) {
  if (!n.IsScalar()) {
    Error(n, what + " must be a duration, got " + Describe(n), "write e.g. 200ms or 2s");
    return std::nullopt;
  }
  auto r = ParseDuration(n.Scalar());
  if (!r.ok()) {
    Error(n, what + ": " + r.status().message(), "durations need a unit, e.g. 200ms or 2s");
    return std::nullopt;
  }
  return *r;
}

std::optional<uint64_t> YamlReader::Size(const YAML::Node& n, const std::string& what) {
  if (!n.IsScalar()) {
    Error(n, what + " must be a size, got " + Describe(n), "write e.g. 64KiB or 16MiB");
    return std::nullopt;
  }
  auto r = ParseSize(n.Scalar());
  if (!r.ok()) {
    Error(n, what + ": " + r.status().message(), "sizes need a unit, e.g. 64KiB or 16MiB");
    return std::nullopt;
  }
  return *r;
}

std::optional<uint64_t> YamlReader::Rate(const YAML::Node& n, const std::string& what) {
  if (!n.IsScalar()) {
    Error(n, what + " must be a rate, got " + Describe(n), "write e.g. 100Mbps or 1Gbps");
    return std::nullopt;
  }
  auto r = ParseRate(n.Scalar());
  if (!r.ok()) {
    Error(n, what + ": " + r.status().message(), "rates need a unit, e.g. 100Mbps or 1Gbps");
    return std::nullopt;
  }
  return *r;
}

std::optional<double> YamlReader::Percent(const YAML::Node& n, const std::string& what) {
  if (n.IsScalar()) {
    auto r = ParsePercent(n.Scalar());
    if (r.ok()) return *r;
  }
  Error(n, what + " must be a percentage in [0, 100], got " + Describe(n), "write e.g. 5% or 5");
  return std::nullopt;
}

}  // namespace faultline::runner
