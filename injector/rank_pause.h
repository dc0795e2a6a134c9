// rank_pause: stops a rank with SIGSTOP; revert continues it with SIGCONT. Observe reads the
// process state from /proc (T while paused). The process must live in --netns.
// JSON parameters: netns, pid.
#pragma once

#include <memory>

#include "injector/fault.h"
#include "injector/process.h"

namespace faultline {

struct RankSignalParams {
  std::string netns;
  int pid = 0;
  static Result<RankSignalParams> FromJson(const nlohmann::json& p);
  nlohmann::json ToJson() const { return {{"netns", netns}, {"pid", pid}}; }
};

class RankPauseFault final : public Fault {
 public:
  explicit RankPauseFault(RankSignalParams p) : params_(std::move(p)) {}
  static Result<std::unique_ptr<Fault>> Create(const nlohmann::json& p);
  // Undo record: {"pid", "start_time"}: SIGCONT if that process still exists.
  static Status Undo(const nlohmann::json& undo);

  std::string_view Kind() const override { return "rank_pause"; }
  nlohmann::json Params() const override { return params_.ToJson(); }
  Result<nlohmann::json> Prepare(const TargetPolicy& policy) override;
  Status Apply(MonoNs scheduled) override;
  Status Revert() override;
  Result<nlohmann::json> Observe() override;

 private:
  RankSignalParams params_;
  ProcessRef ref_;
  bool paused_ = false;
};

}  // namespace faultline
