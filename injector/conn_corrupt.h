// conn_corrupt: asks a rank, through its fault hook (fault_hook.h), to write one frame with a
// corrupt checksum on its TCP connection to `peer` over rail `path`. One-shot. Observe
// queries the rank's count of corrupt frames sent. JSON parameters: hook, peer, path and
// optionally part ("payload": the payload checksum, the default; "header": the header's).
#pragma once

#include <memory>

#include "injector/fault.h"
#include "injector/qp_error.h"

namespace faultline {

class ConnCorruptFault final : public Fault {
 public:
  explicit ConnCorruptFault(HookFaultParams p) : params_(std::move(p)) {}
  static Result<std::unique_ptr<Fault>> Create(const nlohmann::json& p);
  static Status Undo(const nlohmann::json&) { return Status::Ok(); }

  std::string_view Kind() const override { return "conn_corrupt"; }
  nlohmann::json Params() const override { return params_.ToJson(); }
  Result<nlohmann::json> Prepare(const TargetPolicy& policy) override;
  Status Apply(MonoNs scheduled) override;
  // Nothing to undo (one frame went out); the rank may have ended by now.
  Status Revert() override {
    reverted_ = true;
    return Status::Ok();
  }
  Result<nlohmann::json> Observe() override;
  bool Steady() const override { return false; }

 private:
  HookFaultParams params_;
  int64_t before_ = 0;
  nlohmann::json reply_;  // the rank's answer to conn_corrupt
  bool reverted_ = false;
};

}  // namespace faultline
