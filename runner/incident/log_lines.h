// The parsers of `faultline import`'s log sources, one file each, and what they share (not an
// API: use link_log.h). link_log.cc reads a log line by line and asks each source in turn:
//   log_stamps.cc     the timestamps in front of a line (dmesg, syslog, journal, ISO, NX-OS)
//   kernel_log.cc     a host kernel's link messages, `ip monitor link`
//   switch_log.cc     SONiC, Arista EOS, Cumulus, Cisco NX-OS port messages
//   rdma_port_log.cc  RDMA port state changes, the time lines of `ibstat` dumps
//   nccl_log.cc       NCCL_DEBUG, PyTorch ProcessGroupNCCL and ncclras symptoms
// The formats each reads are listed in link_log.h. Pure functions; thread-safe (the regex
// cache is per thread).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "runner/incident/link_log.h"

namespace faultline::runner::incident_internal {

// --- log_stamps.cc

// One compiled regex per pattern (ECMAScript, optimized) for the life of the thread.
const std::regex& Re(const char* pattern, bool icase = false);

// "Jan".."Dec" -> 0..11; -1 for anything else.
int MonthIndex(const std::string& mon);
// Seconds of a UTC calendar time; -1 outside 1970..2200, so that the time in ns fits an
// int64_t.
int64_t EpochSeconds(int year, int mon0, int day, int h, int m, int s);
// ".123456" -> nanoseconds.
int64_t FractionNs(const std::string& frac);
// "+01:00", "+0100", "Z", "" -> seconds east of UTC.
int64_t ZoneOffsetS(const std::string& z);
// "Tue Mar  5 10:15:02 2024" (asctime) -> ns since the epoch.
std::optional<int64_t> AscTimeNs(const std::string& s);
// A decimal number in [lo, hi]; nullopt when empty, not a number, or out of range.
std::optional<int64_t> ToInt(const std::string& s, int64_t lo = 0,
                             int64_t hi = std::numeric_limits<int32_t>::max());
std::optional<int> ToInt32(const std::string& s, int64_t hi = std::numeric_limits<int32_t>::max());
// The resolution of a stamp with the fraction `frac` (".123", "" for whole seconds).
int64_t ResolutionNs(const std::string& frac);
// "eth2:" -> "eth2".
std::string StripColon(std::string s);

// What the front of a line carries: its clocks, the syslog/journal host, and the message.
struct Stamps {
  std::optional<double> kernel_s;
  std::optional<int64_t> wall_ns;
  int64_t wall_res_ns = 0;
  bool year_assumed = false;
  std::string node;
  std::string rest;  // the message after the timestamps
};

// Sets the wall clock of `st` from `epoch_s` and the fraction `frac`.
void SetWall(Stamps& st, int64_t epoch_s, const std::string& frac, bool year_assumed);
// Strips the timestamps (and the syslog/journal host and tag) off the front of a line.
// `year`: the year of classic syslog stamps, which print none.
Stamps Strip(const std::string& line, int year);

// --- the link sources

// A link transition: up, and the names of the device, most specific first.
using Event = std::pair<bool, std::vector<std::string>>;

// Something that looks like a known source but cannot be read; `why` says how.
struct Unreadable {
  std::string why;
};

// kernel_log.cc: a kernel message about a link; nullopt when the line is something else.
std::optional<Event> KernelEvent(const std::string& msg);
// kernel_log.cc: an `ip monitor link` message ("3: eth2: <FLAGS> ... state DOWN ...").
std::optional<Event> IpMonitorEvent(const std::string& msg);
// switch_log.cc: a switch's own message about one of its ports; nullopt when the line is
// something else. Sets `bad` when the line starts like one but cannot be read.
std::optional<Event> SwitchEvent(const std::string& msg, std::optional<Unreadable>& bad);
// rdma_port_log.cc: a kernel message about an RDMA device's port ("mlx5_0" and a port
// number), the same way.
std::optional<Event> RdmaEvent(const std::string& msg, std::optional<Unreadable>& bad);

// An `ibstat` dump, possibly several, each after a timestamp line: the state of every
// DEVICE/PORT; a state that differs from the previous dump's is an event.
struct IbstatState {
  std::string ca;  // the current "CA 'mlx5_0'"
  int ca_line = 0;
  std::string port;  // the current "Port 1:"
  int port_line = 0;
  bool port_has_state = false;
  std::map<std::string, bool> last;  // "mlx5_0/1" -> up, from the previous dump
  std::optional<int64_t> stamp_ns;   // the dump's time
  int64_t stamp_res_ns = 0;
};

// rdma_port_log.cc: a line that is only a time (a `date` before an ibstat dump, "#
// 2026-11-28T03:14:07Z"): {ns since the epoch, resolution}.
std::optional<std::pair<int64_t, int64_t>> StampLine(const std::string& line);

// --- nccl_log.cc: symptoms

// A symptom in one line (NCCL debug output, the framework's watchdog, RAS text monitor);
// nullopt when the line is none of these. Sets `bad` when it starts like one but cannot be
// read.
std::optional<Symptom> SymptomOf(const std::string& raw, int year, std::optional<Unreadable>& bad);
// Symptoms in one ncclras JSON document (`ncclras -f json`, NCCL 2.28.7+: communicators with
// missing_ranks, each unresponsive or considered_dead; a rank whose status has abort_flag or
// async_error) or one event of its monitor mode (`ncclras -m -f json`, 2.29+: "event":
// "PEER_DEAD" with its "peer"), each a copy of `base` with what the document says.
void RasSymptoms(const nlohmann::json& doc, const Symptom& base, std::vector<Symptom>& out);

}  // namespace faultline::runner::incident_internal
