// Root qdiscs through raw rtnetlink messages built and parsed with libnl (RTM_*QDISC).
//
// tbf messages are built here rather than through rtnl_qdisc_tbf_set_rate because libnl 3.7
// takes the rate as a 32-bit int of bytes/s (about 17 Gbit/s at most); here rates of any size
// are sent with TCA_TBF_RATE64 and read back from TCA_TBF_RATE64.
//
// Ownership convention: the project's qdiscs carry well-known handles. kShapingHandle is the
// topology's rail shaping tbf (runner); kFaultHandle is a bandwidth fault's own tbf. A root
// qdisc with any other non-zero handle belongs to the user and is never changed or deleted.
// A netem fault on a shaped rail sits under the shaping tbf, in its one class kShapingClass,
// with kFaultHandle; a child there with any other handle is the user's.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "injector/netlink.h"

namespace faultline {

inline constexpr uint32_t kShapingHandle = 0xF1A00000;         // "f1a0:"
inline constexpr uint32_t kFaultHandle = 0xF1A10000;           // "f1a1:"
inline constexpr uint32_t kShapingClass = kShapingHandle | 1;  // "f1a0:1", the tbf's class

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
// "f1a0:1" style class text ("root" for TC_H_ROOT).
std::string ClassString(uint32_t classid);

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
// Deletes the qdisc `handle` grafted on class `parent` if (and only if) it is there. NotFound
// when it is not. The kernel leaves no qdisc in its place: a tbf whose child was deleted drops
// every packet until RestoreTbfDefaultChild.
Status DeleteChildQdisc(NlSock& sock, int ifindex, uint32_t parent, uint32_t handle);
// Gives the root tbf `handle` its default child back (the kernel's own bfifo, limit = the
// tbf's) after a child qdisc was deleted, by changing the tbf to its current parameters (read
// back from the kernel; the kernel creates the default child when a childless tbf is
// changed). Does nothing when a qdisc the dump shows is grafted on the tbf's class (that one
// is kept). NotFound when the root is not a tbf with `handle`.
Status RestoreTbfDefaultChild(NlSock& sock, int ifindex, uint32_t handle);

}  // namespace faultline
