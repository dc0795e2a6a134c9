// delay, jitter, corrupt, reorder: a netem qdisc (kFaultHandle) through libnl.
//
// The four kinds share this unit because they are one kernel object with different knobs.
// Prepare first probes, in a private throwaway namespace, whether the kernel can create a
// netem qdisc at all; where it cannot (no CONFIG_NET_SCH_NETEM) the fault fails with
// Unavailable naming the missing feature, before anything is journaled or changed.
//
// Where the netem goes (PlanNetemParent): on an interface with only the kernel's default root
// qdisc it becomes the root; on a rail the runner shapes (root tbf kShapingHandle, as the
// bandwidth fault recognises it) it is grafted under the tbf, on its one class kShapingClass,
// in place of the tbf's default child, so the rail keeps its rate. Revert deletes it and gives
// the tbf its default child back (RestoreTbfDefaultChild). A bandwidth fault on the shaped
// rail changes the tbf's rate in either order and keeps the netem child (the kernel keeps a
// tbf's non-fifo child when the tbf is changed). Anything else is refused (AlreadyExists):
// a root or child qdisc the user created, a netem fault already there, and a bandwidth
// fault's own root tbf on an unshaped interface (both faults would need the root).
// JSON parameters: netns, dev, and per kind: delay (duration); jitter (duration, with an
// optional base delay); corrupt (percent); reorder (percent, optional delay, default 10ms).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "injector/fault.h"
#include "injector/netlink.h"
#include "injector/qdisc.h"

namespace faultline {

struct NetemParams {
  std::string kind;  // delay | jitter | corrupt | reorder
  std::string netns;
  std::string dev;
  int64_t delay_ns = 0;
  int64_t jitter_ns = 0;
  double percent = 0;  // corrupt / reorder probability
  static Result<NetemParams> FromJson(std::string_view kind, const nlohmann::json& p);
  nlohmann::json ToJson() const;
};

// Ok when the kernel can create a netem qdisc; Unavailable (with the reason) otherwise.
Status ProbeNetem();

// Where a netem fault's qdisc goes on an interface whose qdiscs are `qdiscs` (ListQdiscs):
// TC_H_ROOT when only the kernel's default root is there, kShapingClass when the root is the
// runner's shaping tbf with its default child; AlreadyExists with the reason otherwise.
// `where` names the interface in messages ("'r0' in 'fl-x-h0'"). Pure: reads nothing else.
Result<uint32_t> PlanNetemParent(const std::vector<QdiscInfo>& qdiscs, const std::string& where);

struct NlMsgDeleter {
  void operator()(nl_msg* m) const;
};
// The RTM_NEWQDISC request that creates the fault's netem (handle kFaultHandle) on class
// `parent` of `ifindex`, with NLM_F_CREATE | NLM_F_EXCL (never replaces anything).
Result<std::unique_ptr<nl_msg, NlMsgDeleter>> BuildNetemAdd(int ifindex, uint32_t parent,
                                                            const NetemParams& p);

class NetemFault final : public Fault {
 public:
  explicit NetemFault(NetemParams p) : params_(std::move(p)) {}
  static Result<std::unique_ptr<Fault>> CreateDelay(const nlohmann::json& p);
  static Result<std::unique_ptr<Fault>> CreateJitter(const nlohmann::json& p);
  static Result<std::unique_ptr<Fault>> CreateCorrupt(const nlohmann::json& p);
  static Result<std::unique_ptr<Fault>> CreateReorder(const nlohmann::json& p);
  // Undo record: {"netns", "dev"}: delete the root qdisc with kFaultHandle; with
  // "parent": kShapingClass: delete the qdisc kFaultHandle under the shaping tbf and give the
  // tbf its default child back. Idempotent (a crash between the two steps is undone too).
  static Status Undo(const nlohmann::json& undo);

  std::string_view Kind() const override { return params_.kind; }
  nlohmann::json Params() const override { return params_.ToJson(); }
  Result<nlohmann::json> Prepare(const TargetPolicy& policy) override;
  Status Apply(MonoNs scheduled) override;
  Status Revert() override;
  Result<nlohmann::json> Observe() override;

 private:
  NetemParams params_;
  std::optional<NlSock> sock_;
  int ifindex_ = 0;
  uint32_t parent_ = 0;  // from PlanNetemParent
};

}  // namespace faultline
