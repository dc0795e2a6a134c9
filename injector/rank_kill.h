// rank_kill: kills a rank with SIGKILL. One-shot: nothing to revert. Observe reads /proc
// (gone or a zombie once killed). JSON parameters: netns, pid.
#pragma once

#include <memory>

#include "injector/fault.h"
#include "injector/process.h"
#include "injector/rank_pause.h"

namespace faultline {

class RankKillFault final : public Fault {
 public:
  explicit RankKillFault(RankSignalParams p) : params_(std::move(p)) {}
  static Result<std::unique_ptr<Fault>> Create(const nlohmann::json& p);
  static Status Undo(const nlohmann::json&) { return Status::Ok(); }

  std::string_view Kind() const override { return "rank_kill"; }
  nlohmann::json Params() const override { return params_.ToJson(); }
  Result<nlohmann::json> Prepare(const TargetPolicy& policy) override;
  Status Apply(MonoNs scheduled) override;
  Status Revert() override { return Status::Ok(); }
  Result<nlohmann::json> Observe() override;
  bool Steady() const override { return false; }

 private:
  RankSignalParams params_;
  ProcessRef ref_;
};

}  // namespace faultline
