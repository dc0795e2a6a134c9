// Shared body of the nftables packet faults (loss, blackhole): one project-owned netdev table
// per fault with an ingress chain on the receiving device, named counters "seen" and
// "dropped", removed by one atomic "delete table". Each kind supplies its rules.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "injector/fault.h"
#include "injector/nft.h"

namespace faultline {

class NftDropFault : public Fault {
 public:
  // Undo record: {"netns", "family": "netdev", "table"}.
  static Status Undo(const nlohmann::json& undo);

  Result<nlohmann::json> Prepare(const TargetPolicy& policy) override;
  Status Apply(MonoNs scheduled) override;
  Status Revert() override;
  // {"in_effect": table present, "table", "seen_packets", "dropped_packets"}: the counters
  // now while the table is in effect, and after Revert their totals when it was removed.
  Result<nlohmann::json> Observe() override;

 protected:
  NftDropFault(std::string netns, std::string dev)
      : netns_(std::move(netns)), dev_(std::move(dev)) {}
  // The rules of the ingress chain (after its declaration), nft syntax, one per line.
  virtual std::string Rules() const = 0;

  std::string netns_;
  std::string dev_;

 private:
  std::string table_;
  std::string script_;
  std::optional<NftSession> nft_;
  // The counters read just before Revert removed the table: {seen, dropped}.
  std::optional<std::pair<int64_t, int64_t>> final_counts_;
};

}  // namespace faultline
