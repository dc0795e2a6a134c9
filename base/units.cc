#include "base/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace faultline {
namespace {

// Splits "<number><unit>" into a finite non-negative number and a lower-case unit.
Status SplitNumber(std::string_view text, const char* what, double* number, std::string* unit) {
  std::string s(text);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t start = 0;
  while (start < s.size() && std::isspace(static_cast<unsigned char>(s[start]))) ++start;
  s = s.substr(start);
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  if (i == 0) {
    return InvalidArgument(std::string("malformed ") + what + " '" + std::string(text) +
                           "': expected a number followed by a unit");
  }
  char* end = nullptr;
  std::string num = s.substr(0, i);
  double v = std::strtod(num.c_str(), &end);
  if (end != num.c_str() + num.size() || !std::isfinite(v) || v < 0) {
    return InvalidArgument(std::string("malformed ") + what + " '" + std::string(text) + "'");
  }
  std::string u = s.substr(i);
  for (char& c : u) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  *number = v;
  *unit = u;
  return Status::Ok();
}

}  // namespace

Result<int64_t> ParseDuration(std::string_view text) {
  double v;
  std::string u;
  FL_RETURN_IF_ERROR(SplitNumber(text, "duration", &v, &u));
  double mult;
  if (u == "ns") {
    mult = 1;
  } else if (u == "us") {
    mult = 1e3;
  } else if (u == "ms") {
    mult = 1e6;
  } else if (u == "s") {
    mult = 1e9;
  } else if (u == "m" || u == "min") {
    mult = 60e9;
  } else if (u == "h") {
    mult = 3600e9;
  } else {
    return InvalidArgument("malformed duration '" + std::string(text) +
                           "': unit must be one of ns, us, ms, s, m, h");
  }
  double ns = v * mult;
  if (ns > 9.2e18) return InvalidArgument("duration '" + std::string(text) + "' is too large");
  return static_cast<int64_t>(std::llround(ns));
}

Result<uint64_t> ParseRate(std::string_view text) {
  double v;
  std::string u;
  FL_RETURN_IF_ERROR(SplitNumber(text, "rate", &v, &u));
  double mult;
  if (u == "bit" || u == "bps") {
    mult = 1;
  } else if (u == "kbit" || u == "kbps") {
    mult = 1e3;
  } else if (u == "mbit" || u == "mbps") {
    mult = 1e6;
  } else if (u == "gbit" || u == "gbps") {
    mult = 1e9;
  } else if (u == "tbit" || u == "tbps") {
    mult = 1e12;
  } else {
    return InvalidArgument("malformed rate '" + std::string(text) +
                           "': unit must be one of bit, kbit, mbit, gbit, tbit (or bps, Mbps, "
                           "Gbps, ...)");
  }
  double bps = v * mult;
  if (bps < 8) return InvalidArgument("rate '" + std::string(text) + "' is below 8 bit/s");
  if (bps > 1.8e19) return InvalidArgument("rate '" + std::string(text) + "' is too large");
  return static_cast<uint64_t>(std::llround(bps));
}

Result<uint64_t> ParseSize(std::string_view text) {
  double v;
  std::string u;
  FL_RETURN_IF_ERROR(SplitNumber(text, "size", &v, &u));
  double mult;
  if (u == "b") {
    mult = 1;
  } else if (u == "k" || u == "kb" || u == "kib") {
    mult = 1024.0;
  } else if (u == "m" || u == "mb" || u == "mib") {
    mult = 1024.0 * 1024;
  } else if (u == "g" || u == "gb" || u == "gib") {
    mult = 1024.0 * 1024 * 1024;
  } else {
    return InvalidArgument("malformed size '" + std::string(text) +
                           "': unit must be one of b, KiB, MiB, GiB");
  }
  return static_cast<uint64_t>(std::llround(v * mult));
}

Result<double> ParsePercent(std::string_view text) {
  std::string s(text);
  if (!s.empty() && s.back() == '%') s.pop_back();
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v) || v < 0 || v > 100) {
    return InvalidArgument("malformed percentage '" + std::string(text) +
                           "': expected a number in [0, 100]");
  }
  return v;
}

std::string FormatDuration(int64_t ns) {
  char buf[64];
  if (ns % 1'000'000'000 == 0) {
    std::snprintf(buf, sizeof(buf), "%llds", static_cast<long long>(ns / 1'000'000'000));
  } else if (ns % 1'000'000 == 0) {
    std::snprintf(buf, sizeof(buf), "%lldms", static_cast<long long>(ns / 1'000'000));
  } else if (ns % 1'000 == 0) {
    std::snprintf(buf, sizeof(buf), "%lldus", static_cast<long long>(ns / 1'000));
  } else {
    std::snprintf(buf, sizeof(buf), "%lldns", static_cast<long long>(ns));
  }
  return buf;
}

std::string FormatRate(uint64_t bps) {
  char buf[64];
  if (bps >= 1'000'000'000 && bps % 1'000'000 == 0) {
    std::snprintf(buf, sizeof(buf), "%gGbit", static_cast<double>(bps) / 1e9);
  } else if (bps >= 1'000'000) {
    std::snprintf(buf, sizeof(buf), "%gMbit", static_cast<double>(bps) / 1e6);
  } else if (bps >= 1'000) {
    std::snprintf(buf, sizeof(buf), "%gKbit", static_cast<double>(bps) / 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%llubit", static_cast<unsigned long long>(bps));
  }
  return buf;
}

}  // namespace faultline
