#include "injector/registry.h"

#include <algorithm>

#include "injector/bandwidth.h"
#include "injector/blackhole.h"
#include "injector/conn_corrupt.h"
#include "injector/conn_reset.h"
#include "injector/daemon.h"
#include "injector/journal.h"
#include "injector/link_down.h"
#include "injector/link_flap.h"
#include "injector/loss.h"
#include "injector/netem.h"
#include "injector/netlink.h"
#include "injector/netns.h"
#include "injector/nft.h"
#include "injector/port_drop.h"
#include "injector/qp_error.h"
#include "injector/rank_kill.h"
#include "injector/rank_pause.h"

namespace faultline {
namespace {

Status UndoNetns(const nlohmann::json& undo) {
  Status st = DeleteNetns(undo.value("netns", ""));
  return st.code() == Code::kNotFound ? Status::Ok() : st;
}

Status UndoVeth(const nlohmann::json& undo) {
  std::string netns = undo.value("netns", "");
  if (!NetnsExists(netns)) return Status::Ok();
  FL_ASSIGN_OR_RETURN(NlSock sock, NlSock::ConnectInNetns(netns));
  Status st = DeleteLink(sock, undo.value("dev", ""));
  return st.code() == Code::kNotFound ? Status::Ok() : st;
}

Status UndoNftTable(const nlohmann::json& undo) { return NftDropFault::Undo(undo); }

bool IsGone(const Status& st) { return st.code() == Code::kNotFound; }

}  // namespace

const std::vector<FaultKindInfo>& FaultKinds() {
  static const std::vector<FaultKindInfo> kinds = {
      {"link_down", "set a link administratively down (host or switch side)", "netns, dev, side",
       LinkDownFault::Create, LinkDownFault::Undo},
      {"link_flap", "flap a link: down D, up U, N times, optional seeded jitter",
       "netns, dev, side, down, up, count, jitter, seed", LinkFlapFault::Create,
       LinkDownFault::Undo},
      {"port_drop", "take a port down for the rest of the run (remove: device disappears)",
       "netns, dev, side, remove", PortDropFault::Create, PortDropFault::Undo},
      {"bandwidth", "limit egress rate with a tbf root qdisc", "netns, dev, rate, burst",
       BandwidthFault::Create, BandwidthFault::Undo},
      {"loss", "drop a seeded percentage of received IP packets (nftables)",
       "netns, dev, percent, seed", LossFault::Create, NftDropFault::Undo},
      {"blackhole", "silently drop every received packet; the link stays up (nftables)",
       "netns, dev", BlackholeFault::Create, NftDropFault::Undo},
      {"delay", "delay egress packets (netem)", "netns, dev, delay, jitter",
       NetemFault::CreateDelay, NetemFault::Undo},
      {"jitter", "jitter egress packet delay (netem)", "netns, dev, jitter, delay",
       NetemFault::CreateJitter, NetemFault::Undo},
      {"corrupt", "corrupt a percentage of egress packets (netem)", "netns, dev, percent",
       NetemFault::CreateCorrupt, NetemFault::Undo},
      {"reorder", "reorder a percentage of egress packets (netem)", "netns, dev, percent, delay",
       NetemFault::CreateReorder, NetemFault::Undo},
      {"conn_reset", "reset matching TCP connections (sock_diag destroy)",
       "netns, src, dst, sport, dport", ConnResetFault::Create, ConnResetFault::Undo},
      {"rank_pause", "SIGSTOP a rank; revert sends SIGCONT", "netns, pid", RankPauseFault::Create,
       RankPauseFault::Undo},
      {"rank_kill", "SIGKILL a rank", "netns, pid", RankKillFault::Create, RankKillFault::Undo},
      {"qp_error", "move a verbs QP of a rank to IBV_QPS_ERR (fault hook)", "hook, peer, path",
       QpErrorFault::Create, QpErrorFault::Undo},
      {"conn_corrupt", "write one corrupt frame on a rank's TCP connection (fault hook)",
       "hook, peer, path", ConnCorruptFault::Create, ConnCorruptFault::Undo},
      // Resources the project creates; undo only.
      {"netns", "a network namespace the project created", "", nullptr, UndoNetns},
      {"veth", "a veth pair the project created", "", nullptr, UndoVeth},
      {"nft_table", "an nftables table the project created", "", nullptr, UndoNftTable},
      {"daemon", "a daemon the project started (faultline cluster)", "", nullptr, UndoDaemon},
      {"netns_procs", "every process left in a namespace the project created", "", nullptr,
       UndoNetnsProcs},
      {"dir", "a directory tree the project created", "", nullptr, UndoOwnedDir},
  };
  return kinds;
}

const FaultKindInfo* FindFaultKind(std::string_view name) {
  for (const FaultKindInfo& k : FaultKinds()) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

Result<std::unique_ptr<Fault>> CreateFault(std::string_view kind, const nlohmann::json& params) {
  const FaultKindInfo* info = FindFaultKind(kind);
  if (info == nullptr || info->create == nullptr) {
    std::string known;
    for (const FaultKindInfo& k : FaultKinds()) {
      if (k.create == nullptr) continue;
      known += (known.empty() ? "" : ", ") + std::string(k.name);
    }
    return NotFound("unknown fault kind '" + std::string(kind) + "' (known: " + known + ")");
  }
  auto f = info->create(params);
  if (!f.ok()) return f.status().WithContext(std::string(kind));
  return f;
}

Status UndoJournalEntry(std::string_view kind, const nlohmann::json& undo) {
  const FaultKindInfo* info = FindFaultKind(kind);
  if (info == nullptr)
    return InvalidArgument("journal entry of unknown kind '" + std::string(kind) + "'");
  // A namespace that no longer exists took everything in it along.
  if (undo.is_object() && undo.contains("netns") && undo["netns"].is_string() &&
      (!undo.contains("park_netns") || undo["park_netns"].is_string()) &&
      info->undo != UndoNetns) {
    std::string ns = undo.value("netns", "");
    if (!ns.empty() && !NetnsExists(ns) && undo.value("park_netns", "").empty()) {
      return Status::Ok();
    }
  }
  // An entry edited by hand may hold a field of the wrong type; the undo functions read
  // fields with json::value(), which throws then. That is this entry's error, not cleanup's end.
  Status st;
  try {
    st = info->undo(undo);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument("journal entry of kind '" + std::string(kind) +
                           "' has a malformed undo: " + e.what());
  }
  return IsGone(st) ? Status::Ok() : st;
}

nlohmann::json CleanupReport::ToJson() const {
  return {{"undone", undone}, {"failed", failed}, {"errors", errors}};
}

CleanupReport CleanupJournal(Journal& journal) {
  CleanupReport report;
  auto entries = journal.List();
  if (!entries.ok()) {
    report.failed = 1;
    report.errors.push_back(entries.status().ToString());
    return report;
  }
  std::reverse(entries->begin(), entries->end());
  for (const JournalEntry& e : *entries) {
    Status st = UndoJournalEntry(e.kind, e.undo);
    if (st.ok()) st = journal.Remove(e.id);
    if (st.ok() || st.code() == Code::kNotFound) {
      ++report.undone;
    } else {
      ++report.failed;
      report.errors.push_back(e.kind + " " + e.id + ": " + st.ToString());
    }
  }
  return report;
}

Result<std::string> JournalNetns(Journal& journal, std::string_view name) {
  return journal.Append("netns", nlohmann::json{{"netns", std::string(name)}});
}

}  // namespace faultline
