// conn_reset: resets the TCP connections in a namespace that match a filter, through
// NETLINK_SOCK_DIAG SOCK_DESTROY (the peer receives a RST). One-shot: there is nothing to
// revert. Observe lists the matching connections that remain.
// JSON parameters: netns, src, dst, sport, dport (all filters optional; listeners are never
// touched).
#pragma once

#include <memory>

#include "injector/fault.h"
#include "injector/sock_diag.h"

namespace faultline {

struct ConnResetParams {
  std::string netns;
  TcpFilter filter;
  static Result<ConnResetParams> FromJson(const nlohmann::json& p);
  nlohmann::json ToJson() const;
};

class ConnResetFault final : public Fault {
 public:
  explicit ConnResetFault(ConnResetParams p) : params_(std::move(p)) {}
  static Result<std::unique_ptr<Fault>> Create(const nlohmann::json& p);
  static Status Undo(const nlohmann::json&) { return Status::Ok(); }

  std::string_view Kind() const override { return "conn_reset"; }
  nlohmann::json Params() const override { return params_.ToJson(); }
  Result<nlohmann::json> Prepare(const TargetPolicy& policy) override;
  Status Apply(MonoNs scheduled) override;
  Status Revert() override { return Status::Ok(); }
  Result<nlohmann::json> Observe() override;
  bool Steady() const override { return false; }

  int destroyed() const { return destroyed_; }

 private:
  ConnResetParams params_;
  int matched_ = 0;
  int destroyed_ = 0;
};

}  // namespace faultline
