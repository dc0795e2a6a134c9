#include "injector/params.h"

#include <cstdlib>

#include "base/units.h"

namespace faultline::params {
namespace {

Status Missing(const char* key) {
  return InvalidArgument(std::string("missing parameter '") + key + "'");
}

Status Bad(const char* key, const nlohmann::json& v, const char* expect) {
  return InvalidArgument(std::string("parameter '") + key + "': expected " + expect + ", got " +
                         v.dump());
}

}  // namespace

Status CheckKeys(const nlohmann::json& p, std::initializer_list<const char*> allowed) {
  if (!p.is_object()) return InvalidArgument("parameters must be an object");
  for (auto it = p.begin(); it != p.end(); ++it) {
    bool ok = false;
    for (const char* a : allowed) ok = ok || it.key() == a;
    if (!ok) {
      std::string list;
      for (const char* a : allowed) list += std::string(list.empty() ? "" : ", ") + a;
      return InvalidArgument("unknown parameter '" + it.key() + "' (accepted: " + list + ")");
    }
  }
  return Status::Ok();
}

Result<std::string> String(const nlohmann::json& p, const char* key,
                           std::optional<std::string> def) {
  if (!p.contains(key) || p[key].is_null()) {
    if (def) return *def;
    return Missing(key);
  }
  const auto& v = p[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  return Bad(key, v, "a string");
}

Result<int64_t> Duration(const nlohmann::json& p, const char* key, std::optional<int64_t> def) {
  if (!p.contains(key) || p[key].is_null()) {
    if (def) return *def;
    return Missing(key);
  }
  const auto& v = p[key];
  if (!v.is_string()) return Bad(key, v, "a duration with a unit such as \"200ms\"");
  auto r = ParseDuration(v.get<std::string>());
  if (!r.ok()) return r.status().WithContext(std::string("parameter '") + key + "'");
  return r;
}

Result<int64_t> Int(const nlohmann::json& p, const char* key, std::optional<int64_t> def) {
  if (!p.contains(key) || p[key].is_null()) {
    if (def) return *def;
    return Missing(key);
  }
  const auto& v = p[key];
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    char* end = nullptr;
    long long x = std::strtoll(s.c_str(), &end, 0);
    if (!s.empty() && end == s.c_str() + s.size()) return static_cast<int64_t>(x);
  }
  return Bad(key, v, "an integer");
}

Result<uint64_t> Rate(const nlohmann::json& p, const char* key, std::optional<uint64_t> def) {
  if (!p.contains(key) || p[key].is_null()) {
    if (def) return *def;
    return Missing(key);
  }
  const auto& v = p[key];
  if (!v.is_string()) return Bad(key, v, "a rate with a unit such as \"100mbit\"");
  auto r = ParseRate(v.get<std::string>());
  if (!r.ok()) return r.status().WithContext(std::string("parameter '") + key + "'");
  return r;
}

Result<uint64_t> Size(const nlohmann::json& p, const char* key, std::optional<uint64_t> def) {
  if (!p.contains(key) || p[key].is_null()) {
    if (def) return *def;
    return Missing(key);
  }
  const auto& v = p[key];
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (!v.is_string()) return Bad(key, v, "a size with a unit such as \"64KiB\"");
  auto r = ParseSize(v.get<std::string>());
  if (!r.ok()) return r.status().WithContext(std::string("parameter '") + key + "'");
  return r;
}

Result<double> Percent(const nlohmann::json& p, const char* key, std::optional<double> def) {
  if (!p.contains(key) || p[key].is_null()) {
    if (def) return *def;
    return Missing(key);
  }
  const auto& v = p[key];
  if (v.is_number()) {
    double d = v.get<double>();
    if (d >= 0 && d <= 100) return d;
    return Bad(key, v, "a percentage in [0, 100]");
  }
  if (!v.is_string()) return Bad(key, v, "a percentage");
  auto r = ParsePercent(v.get<std::string>());
  if (!r.ok()) return r.status().WithContext(std::string("parameter '") + key + "'");
  return r;
}

Result<bool> Bool(const nlohmann::json& p, const char* key, std::optional<bool> def) {
  if (!p.contains(key) || p[key].is_null()) {
    if (def) return *def;
    return Missing(key);
  }
  const auto& v = p[key];
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    if (s == "true" || s == "1" || s == "yes") return true;
    if (s == "false" || s == "0" || s == "no") return false;
  }
  return Bad(key, v, "true or false");
}

}  // namespace faultline::params
