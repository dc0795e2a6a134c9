#include "grow_id.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace ftccl {
namespace {

constexpr char kPrefix[] = "ftccl-grow:1:";

uint64_t Mix(uint64_t key, uint64_t v) {
  key ^= v + 0x9E3779B97F4A7C15ull + (key << 6) + (key >> 2);
  return key * 0xBF58476D1CE4E5B9ull;
}

bool ParseU64(const std::string& s, int base, uint64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s.c_str(), &end, base);
  if (errno != 0 || end == nullptr || *end != '\0' || s[0] == '-' || s[0] == '+') return false;
  *out = v;
  return true;
}

}  // namespace

uint64_t GrowKey(uint64_t comm_id, uint64_t epoch, int old_size, int new_size) {
  uint64_t key = comm_id ^ 0x47524F5747524F57ull;  // "GROWGROW"
  key = Mix(key, epoch);
  key = Mix(key, static_cast<uint64_t>(old_size));
  key = Mix(key, static_cast<uint64_t>(new_size));
  return key == 0 ? 1 : key;
}

uint64_t JoinerKey(uint64_t key) {
  uint64_t j = Mix(key, 0x4A4F494E);  // "JOIN"
  if (j == 0 || j == key) j = key ^ 0x5A5A5A5A5A5A5A5Aull;
  return j;
}

std::string GrowTicket::ToString() const {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%s%016" PRIx64 ":%" PRIu64 ":%d:%d:%s:%016" PRIx64, kPrefix,
                comm_id, epoch, old_size, new_size, root.ToString().c_str(), key);
  return buf;
}

Result<GrowTicket> ParseGrowId(const std::string& text) {
  const std::string prefix = kPrefix;
  if (text.compare(0, prefix.size(), prefix) != 0) {
    return InvalidArgument("grow id '" + text + "' does not start with '" + prefix + "'");
  }
  std::vector<std::string> f;
  size_t pos = prefix.size();
  for (;;) {
    size_t colon = text.find(':', pos);
    f.push_back(text.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos));
    if (colon == std::string::npos) break;
    pos = colon + 1;
  }
  // comm id, epoch, old size, new size, ip, port, key
  if (f.size() != 7)
    return InvalidArgument("grow id '" + text + "' has the wrong number of fields");
  GrowTicket t;
  uint64_t old_size = 0, new_size = 0;
  if (!ParseU64(f[0], 16, &t.comm_id) || !ParseU64(f[1], 10, &t.epoch) ||
      !ParseU64(f[2], 10, &old_size) || !ParseU64(f[3], 10, &new_size) ||
      !ParseU64(f[6], 16, &t.key)) {
    return InvalidArgument("grow id '" + text + "' has a malformed number");
  }
  if (t.epoch < 1 || old_size < 1 || new_size <= old_size || new_size > 65536) {
    return InvalidArgument("grow id '" + text +
                           "': sizes must satisfy 1 <= old < new (epoch >= 1)");
  }
  t.old_size = static_cast<int>(old_size);
  t.new_size = static_cast<int>(new_size);
  auto ep = net::ParseEndpoint(f[4] + ":" + f[5]);
  if (!ep.ok() || ep->ip == 0 || ep->port == 0) {
    return InvalidArgument("grow id '" + text + "' has no usable root address");
  }
  t.root = ep.value();
  if (t.key != GrowKey(t.comm_id, t.epoch, t.old_size, t.new_size)) {
    return InvalidArgument("grow id '" + text +
                           "' is inconsistent: its key does not match its fields");
  }
  return t;
}

}  // namespace ftccl
