// Root qdiscs through raw rtnetlink messages built and parsed with libnl (RTM_*QDISC).
//
// tbf messages are built here rather than through rtnl_qdisc_tbf_set_rate because libnl 3.7
// takes the rate as a 32-bit int of bytes/s (about 17 Gbit/s at most); here rates of any size
// are sent with TCA_TBF_RATE64 and read back from TCA_TBF_RATE64.
//
// Ownership convention: the project's qdiscs carry well-known handles. kShapingHandle is the
// topology's rail shaping tbf (runner); kFaultHandle is a bandwidth fault's own tbf. A root
// qdisc with any other non-zero handle belongs to the user and is never changed or deleted.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "injector/netlink.h"

namespace faultline {

inline constexpr uint32_t kShapingHandle = 0xF1A00000;  // "f1a0:"
inline constexpr uint32_t kFaultHandle = 0xF1A10000;    // "f1a1:"

struct QdiscInfo {
  int ifindex = 0;
  std::string kind;
  uint32_t handle = 0;
  uint32_t parent = 0;
  bool is_root = false;
  // tbf only:
  uint64_t rate_bytes_per_s = 0;
  uint32_t limit_bytes = 0;
  uint32_t buffer_ticks = 0;  // token bucket size in psched ticks (as the kernel reports it)
  std::string tbf_qopt_hex;   // the kernel's tc_tbf_qopt verbatim (restores exactly)
  uint64_t rate64 = 0;        // TCA_TBF_RATE64 when present
  uint64_t prate64 = 0;       // TCA_TBF_PRATE64 when present
  nlohmann::json ToJson() const;
  // Everything needed to restore the qdisc exactly (journal form) and back.
  nlohmann::json ToUndoJson() const;
  static Result<QdiscInfo> FromUndoJson(const nlohmann::json& j);
};

// Every qdisc on `ifindex` (including the kernel's default ones, handle 0).
Result<std::vector<QdiscInfo>> ListQdiscs(NlSock& sock, int ifindex);
// The root qdisc of `ifindex`, if any.
Result<std::optional<QdiscInfo>> GetRootQdisc(NlSock& sock, int ifindex);
// "f1a0:" style handle text.
std::string HandleString(uint32_t handle);

struct TbfConfig {
  uint64_t rate_bits_per_s = 0;
  uint32_t burst_bytes = 0;  // 0: max(64 KiB, rate/250)
  uint32_t limit_bytes = 0;  // 0: 50 ms at rate + burst
};

// Creates a root tbf with `handle` (NLM_F_CREATE | NLM_F_EXCL: fails with AlreadyExists if a
// non-default root qdisc is present; nothing of the user's is overwritten).
Status CreateRootTbf(NlSock& sock, int ifindex, uint32_t handle, const TbfConfig& config);
// Changes the rate of an existing root tbf with `handle` (no create, no replace).
Status ChangeRootTbf(NlSock& sock, int ifindex, uint32_t handle, const TbfConfig& config);
// Restores a root tbf with `handle` to a state read earlier (QdiscInfo from ListQdiscs).
Status RestoreRootTbf(NlSock& sock, int ifindex, const QdiscInfo& before);
// Deletes the root qdisc if (and only if) its handle is `handle`. NotFound when it is not.
Status DeleteRootQdisc(NlSock& sock, int ifindex, uint32_t handle);

}  // namespace faultline
