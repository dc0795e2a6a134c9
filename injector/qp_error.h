// qp_error: asks a rank, through its fault hook (fault_hook.h), to move the verbs QP that
// reaches `peer` over rail `path` to IBV_QPS_ERR. One-shot (the rank's own recovery heals
// it). Observe queries the QP state through the hook. JSON parameters: hook, peer, path.
#pragma once

#include <memory>

#include "injector/fault.h"

namespace faultline {

struct HookFaultParams {
  std::string hook;  // the Unix socket path the rank serves
  int peer = 0;
  int path = 0;
  std::string part;  // conn_corrupt only: "payload" or "header"; empty: the rank's default
  // `kind` decides whether "part" is accepted.
  static Result<HookFaultParams> FromJson(const nlohmann::json& p, std::string_view kind);
  nlohmann::json ToJson() const {
    nlohmann::json j = {{"hook", hook}, {"peer", peer}, {"path", path}};
    if (!part.empty()) j["part"] = part;
    return j;
  }
};

class QpErrorFault final : public Fault {
 public:
  explicit QpErrorFault(HookFaultParams p) : params_(std::move(p)) {}
  static Result<std::unique_ptr<Fault>> Create(const nlohmann::json& p);
  static Status Undo(const nlohmann::json&) { return Status::Ok(); }

  std::string_view Kind() const override { return "qp_error"; }
  nlohmann::json Params() const override { return params_.ToJson(); }
  Result<nlohmann::json> Prepare(const TargetPolicy& policy) override;
  Status Apply(MonoNs scheduled) override;
  // Nothing to undo (the rank's own recovery heals the QP); the rank may have ended by now.
  Status Revert() override {
    reverted_ = true;
    return Status::Ok();
  }
  Result<nlohmann::json> Observe() override;
  bool Steady() const override { return false; }

 private:
  HookFaultParams params_;
  nlohmann::json reply_;
  bool reverted_ = false;
};

}  // namespace faultline
