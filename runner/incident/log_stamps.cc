// The timestamps of a log line and the small reads every log source shares (log_lines.h).
#include "runner/incident/log_lines.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <limits>
#include <map>

namespace faultline::runner::incident_internal {

const std::regex& Re(const char* pattern, bool icase) {
  // One compiled regex per pattern for the life of the program.
  static thread_local std::map<std::string, std::regex> cache;
  const std::string key = std::string(icase ? "i:" : "c:") + pattern;
  auto it = cache.find(key);
  if (it == cache.end()) {
    auto flags = std::regex::ECMAScript | std::regex::optimize;
    if (icase) flags |= std::regex::icase;
    it = cache.emplace(key, std::regex(pattern, flags)).first;
  }
  return it->second;
}

int MonthIndex(const std::string& mon) {
  static const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                  "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  for (int i = 0; i < 12; ++i) {
    if (mon == kMonths[i]) return i;
  }
  return -1;
}

// Seconds of a UTC calendar time; -1 when out of range.
// -1 outside 1970..2200, so that the time in ns fits an int64_t.
int64_t EpochSeconds(int year, int mon0, int day, int h, int m, int s) {
  if (year < 1970 || year > 2200) return -1;
  if (mon0 < 0 || day < 1 || day > 31 || h > 23 || m > 59 || s > 60) return -1;
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = mon0;
  tm.tm_mday = day;
  tm.tm_hour = h;
  tm.tm_min = m;
  tm.tm_sec = s;
  return static_cast<int64_t>(timegm(&tm));
}

// ".123456" -> nanoseconds.
int64_t FractionNs(const std::string& frac) {
  if (frac.size() < 2) return 0;
  std::string digits = frac.substr(1, 9);
  while (digits.size() < 9) digits += '0';
  int64_t v = 0;
  std::from_chars(digits.data(), digits.data() + digits.size(), v);
  return v;
}

// "+01:00", "+0100", "Z", "" -> seconds east of UTC.
int64_t ZoneOffsetS(const std::string& z) {
  if (z.empty() || z == "Z") return 0;
  const int sign = z[0] == '-' ? -1 : 1;
  std::string d;
  for (char c : z) {
    if (c >= '0' && c <= '9') d += c;
  }
  if (d.size() != 4) return 0;
  return sign * (((d[0] - '0') * 10 + (d[1] - '0')) * 3600 + ((d[2] - '0') * 10 + (d[3] - '0')) * 60);
}

// "Tue Mar  5 10:15:02 2024" (asctime) -> ns since the epoch.
std::optional<int64_t> AscTimeNs(const std::string& s) {
  std::smatch m;
  if (!std::regex_match(s, m,
                        Re(R"(\w{3} (\w{3}) +(\d{1,2}) (\d\d):(\d\d):(\d\d) (\d{4}))"))) {
    return std::nullopt;
  }
  int64_t e = EpochSeconds(std::stoi(m[6]), MonthIndex(m[1]), std::stoi(m[2]), std::stoi(m[3]),
                           std::stoi(m[4]), std::stoi(m[5]));
  if (e < 0) return std::nullopt;
  return e * 1'000'000'000LL;
}

// A decimal number in [lo, hi]; nullopt when empty, not a number, or out of range.
std::optional<int64_t> ToInt(const std::string& s, int64_t lo, int64_t hi) {
  int64_t v = 0;
  const char* end = s.data() + s.size();
  auto r = std::from_chars(s.data(), end, v);
  if (s.empty() || r.ec != std::errc() || r.ptr != end || v < lo || v > hi) return std::nullopt;
  return v;
}

std::optional<int> ToInt32(const std::string& s, int64_t hi) {
  auto v = ToInt(s, 0, hi);
  if (!v) return std::nullopt;
  return static_cast<int>(*v);
}

// The resolution of a stamp with the fraction `frac` (".123", "" for whole seconds).
int64_t ResolutionNs(const std::string& frac) {
  if (frac.size() < 2) return 1'000'000'000;
  int64_t r = 1'000'000'000;
  for (size_t i = 1; i < frac.size() && i <= 9; ++i) r /= 10;
  return r;
}

void SetWall(Stamps& st, int64_t epoch_s, const std::string& frac, bool year_assumed) {
  st.wall_ns = epoch_s * 1'000'000'000LL + FractionNs(frac);
  st.wall_res_ns = ResolutionNs(frac);
  st.year_assumed = year_assumed;
}

// Strips the timestamps (and the syslog/journal host and tag) off the front of a line.
// `year`: the year of classic syslog stamps, which print none.
Stamps Strip(const std::string& line, int year) {
  Stamps st;
  std::string rest = line;
  std::smatch m;
  // ISO 8601 (journalctl -o short-iso / short-iso-precise, rsyslog): time, host, tag.
  if (std::regex_search(rest, m,
                        Re(R"(^(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(\.\d+)?(Z|[+-]\d\d:?\d\d)?\s+(\S+)\s+)"))) {
    int64_t e = EpochSeconds(std::stoi(m[1]), std::stoi(m[2]) - 1, std::stoi(m[3]),
                             std::stoi(m[4]), std::stoi(m[5]), std::stoi(m[6]));
    if (e >= 0) {
      SetWall(st, e - ZoneOffsetS(m[8]), m[7], false);
      st.node = m[9];
      rest = m.suffix();
    }
  } else if (std::regex_search(rest, m,
                               Re(R"(^(\w{3}) +(\d{1,2}) (\d\d):(\d\d):(\d\d)(\.\d+)?\s+(\S+)\s+)"))) {
    // Classic syslog (journalctl -o short, SONiC, EOS): no year; `year` is assumed.
    int64_t e = EpochSeconds(year, MonthIndex(m[1]), std::stoi(m[2]), std::stoi(m[3]),
                             std::stoi(m[4]), std::stoi(m[5]));
    if (e >= 0) {
      SetWall(st, e, m[6], true);
      st.node = m[7];
      rest = m.suffix();
    }
  } else if (std::regex_search(rest, m,
                               Re(R"(^(\d{4}) (\w{3}) +(\d{1,2}) (\d\d):(\d\d):(\d\d)(\.\d+)?(?: (?:UTC|GMT))?:?\s+(?!%)(\S+)\s+)"))) {
    // NX-OS local log ("show logging logfile"): the year first, then the switch's name.
    int64_t e = EpochSeconds(std::stoi(m[1]), MonthIndex(m[2]), std::stoi(m[3]), std::stoi(m[4]),
                             std::stoi(m[5]), std::stoi(m[6]));
    if (e >= 0) {
      SetWall(st, e, m[7], false);
      st.node = m[8];
      rest = m.suffix();
    }
  }
  if (!st.node.empty()) {
    // The tag: "kernel:", "NetworkManager[812]:".
    if (std::regex_search(rest, m, Re(R"(^[\w.\-/]+(\[\d+\])?:\s*)"))) rest = m.suffix();
    // NX-OS through a syslog relay: the switch's own stamp, with its year, after the relay's.
    if (std::regex_search(rest, m,
                          Re(R"(^(\d{4}) (\w{3}) +(\d{1,2}) (\d\d):(\d\d):(\d\d)(\.\d+)?(?: (?:UTC|GMT))?:\s*)"))) {
      int64_t e = EpochSeconds(std::stoi(m[1]), MonthIndex(m[2]), std::stoi(m[3]),
                               std::stoi(m[4]), std::stoi(m[5]), std::stoi(m[6]));
      if (e >= 0) {
        SetWall(st, e, m[7], false);
        rest = m.suffix();
      }
    }
  }
  // dmesg -T: "[Tue Mar  5 10:15:02 2024] ".
  if (std::regex_search(rest, m, Re(R"(^\[(\w{3} \w{3} +\d{1,2} \d\d:\d\d:\d\d \d{4})\]\s*)"))) {
    if (auto ns = AscTimeNs(m[1])) {
      if (!st.wall_ns) {
        st.wall_ns = *ns;
        st.wall_res_ns = 1'000'000'000;
      }
      rest = m.suffix();
    }
  }
  // ip -ts: "[2024-03-05T10:15:02.123456] ".
  if (std::regex_search(rest, m,
                        Re(R"(^\[(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d+)?\]\s*)"))) {
    int64_t e = EpochSeconds(std::stoi(m[1]), std::stoi(m[2]) - 1, std::stoi(m[3]),
                             std::stoi(m[4]), std::stoi(m[5]), std::stoi(m[6]));
    if (e >= 0) {
      if (!st.wall_ns) SetWall(st, e, m[7], false);
      rest = m.suffix();
    }
  }
  // dmesg: "[12345.678901] " (at most 9 digits of seconds since boot, so that ns fit).
  if (std::regex_search(rest, m, Re(R"(^\[\s*(\d{1,9}\.\d{1,9})\]\s*)"))) {
    st.kernel_s = std::strtod(m[1].str().c_str(), nullptr);
    rest = m.suffix();
  }
  st.rest = rest;
  return st;
}

std::string StripColon(std::string s) {
  while (!s.empty() && s.back() == ':') s.pop_back();
  return s;
}

}  // namespace faultline::runner::incident_internal
