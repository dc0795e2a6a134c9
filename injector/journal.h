// The undo journal: what must be undone to return the system to where it was.
//
// One JSON file per entry in a directory (default /run/faultline/journal, overridable with
// FAULTLINE_JOURNAL_DIR). An entry is written to a temporary file, fsynced, renamed into
// place and the directory fsynced before Append returns, so an entry survives a SIGKILL at
// any later point. Remove unlinks the entry and fsyncs the directory. Entry file names sort
// in creation order. Several processes may share a directory; each entry is owned by one
// writer until `faultline cleanup` takes over. Thread-compatible (one Journal per thread).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace faultline {

struct JournalEntry {
  std::string id;       // file name without ".json"; sorts in creation order
  std::string kind;     // fault kind or resource kind ("netns", "veth", ...)
  nlohmann::json undo;  // kind-specific description of how to undo
  int pid = 0;          // the process that wrote it
  int64_t created_mono_ns = 0;
};

// Parses the text of one entry file (`id` is its name without ".json"). kInternal, naming
// `path`, for anything that is not a JSON object with a "kind" string and an "undo" object; a
// "pid" or "created_mono_ns" of the wrong type reads as 0. Pure; never throws.
Result<JournalEntry> ParseJournalEntry(std::string_view text, std::string id,
                                       const std::string& path);

class Journal final {
 public:
  // $FAULTLINE_JOURNAL_DIR, else /run/faultline/journal.
  static std::string DefaultDir();
  // Opens (and creates, mode 0700) the directory.
  static Result<std::unique_ptr<Journal>> Open(std::string dir);

  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // Durably records an undo; returns its id. Must be called BEFORE the change it undoes.
  Result<std::string> Append(std::string_view kind, const nlohmann::json& undo);
  // Durably replaces the undo of an existing entry.
  Status Update(std::string_view id, std::string_view kind, const nlohmann::json& undo);
  // Durably removes an entry (after its change was undone). NotFound when absent.
  Status Remove(std::string_view id);
  // Every entry, oldest first. Unreadable entries are reported as errors.
  Result<std::vector<JournalEntry>> List() const;
  // True when a "netns" entry names this namespace (the project created it).
  bool RecordsNetns(std::string_view name) const;

  const std::string& dir() const { return dir_; }

 private:
  explicit Journal(std::string dir) : dir_(std::move(dir)) {}
  Status WriteEntry(const std::string& id, const JournalEntry& e);
  Status SyncDir() const;
  std::string dir_;
  uint64_t seq_ = 0;
};

}  // namespace faultline
