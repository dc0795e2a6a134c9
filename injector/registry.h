// The explicit registry of fault kinds and of everything the journal can undo.
//
// Each fault kind registers a factory (JSON parameters -> Fault) and an undo function (journal
// undo record -> Status). Resource kinds that the project creates outside faults ("netns",
// "veth", "nft_table") register only an undo. Immutable; thread-safe.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "injector/fault.h"

namespace faultline {

class Journal;

struct FaultKindInfo {
  std::string_view name;
  std::string_view summary;
  std::string_view params;  // accepted JSON parameters, for help texts
  Result<std::unique_ptr<Fault>> (*create)(const nlohmann::json& params);  // null: resource
  Status (*undo)(const nlohmann::json& undo);
};

// Every fault kind, in documentation order.
const std::vector<FaultKindInfo>& FaultKinds();
const FaultKindInfo* FindFaultKind(std::string_view name);
// NotFound "unknown fault kind 'x' (known: ...)" for an unknown name.
Result<std::unique_ptr<Fault>> CreateFault(std::string_view kind, const nlohmann::json& params);
// Runs the undo of one journal entry (fault or resource kind). Ok when the thing to undo is
// already gone (its namespace or device disappeared).
Status UndoJournalEntry(std::string_view kind, const nlohmann::json& undo);

struct CleanupReport {
  int undone = 0;
  int failed = 0;
  std::vector<std::string> errors;
  nlohmann::json ToJson() const;
};

// Undoes every entry of the journal, newest first, removing each one that was undone.
// Entries whose undo fails stay in the journal and are reported. A second run is a no-op.
CleanupReport CleanupJournal(Journal& journal);

// Journal helpers for resources the project creates (used by tests and the topology):
// Records that the project is about to create namespace `name` (call before CreateNetns).
Result<std::string> JournalNetns(Journal& journal, std::string_view name);

}  // namespace faultline
