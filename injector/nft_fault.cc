#include "injector/nft_fault.h"

#include "injector/policy.h"

namespace faultline {

Status NftDropFault::Undo(const nlohmann::json& undo) {
  return DeleteNftTable(undo.value("netns", ""), undo.value("family", "netdev"),
                        undo.value("table", ""));
}

Result<nlohmann::json> NftDropFault::Prepare(const TargetPolicy& policy) {
  FL_RETURN_IF_ERROR(policy.CheckInterface(netns_, dev_));
  FL_ASSIGN_OR_RETURN(NftSession s, NftSession::Open(netns_));
  table_ = NewNftTableName(Kind());
  // Built now so that Apply is one libnftables call (one atomic transaction).
  script_ = "table netdev " + table_ + " {\n  counter seen {}\n  counter dropped {}\n" +
            "  chain ingress {\n    type filter hook ingress device \"" + dev_ +
            "\" priority -500; policy accept;\n" + Rules() + "  }\n}\n";
  nft_.emplace(std::move(s));
  return nlohmann::json{{"netns", netns_}, {"family", "netdev"}, {"table", table_}};
}

Status NftDropFault::Apply(MonoNs) { return nft_->Run(script_); }

Status NftDropFault::Revert() {
  FL_ASSIGN_OR_RETURN(bool has, nft_->HasTable("netdev", table_));
  if (!has) return Status::Ok();
  // What the fault did over its whole life, read before the table and its counters go.
  auto seen = nft_->CounterPackets("netdev", table_, "seen");
  auto dropped = nft_->CounterPackets("netdev", table_, "dropped");
  if (seen.ok() && dropped.ok()) final_counts_ = std::make_pair(*seen, *dropped);
  return nft_->Run("delete table netdev " + table_);
}

Result<nlohmann::json> NftDropFault::Observe() {
  FL_ASSIGN_OR_RETURN(bool has, nft_->HasTable("netdev", table_));
  nlohmann::json out = {{"in_effect", has}, {"table", "netdev " + table_}};
  if (has) {
    FL_ASSIGN_OR_RETURN(int64_t seen, nft_->CounterPackets("netdev", table_, "seen"));
    FL_ASSIGN_OR_RETURN(int64_t dropped, nft_->CounterPackets("netdev", table_, "dropped"));
    out["seen_packets"] = seen;
    out["dropped_packets"] = dropped;
  } else if (final_counts_) {
    out["seen_packets"] = final_counts_->first;
    out["dropped_packets"] = final_counts_->second;
  }
  return out;
}

}  // namespace faultline
