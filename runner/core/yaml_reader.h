// YamlReader: typed reads of YAML nodes that never stop at the first problem. Every problem
// becomes a Diagnostic (file:line:column, message, hint) collected in the reader, and the read
// returns nullopt/false, so a caller reports every error of a file in one pass. Shared by the
// scenario parser (scenario_*.cc) and the fault kinds' parameter parsers (faults/). Not
// thread-safe; one reader per parse.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runner/core/scenario.h"

namespace YAML {
class Node;
}

namespace faultline::runner {

// "did you mean 'x'?" when a close candidate exists, else "expected one of: a, b, ...".
std::string SuggestHint(const std::string& got, const std::vector<std::string>& candidates);

class YamlReader {
 public:
  // `file` names the file in every diagnostic.
  explicit YamlReader(std::string file) : file_(std::move(file)) {}

  const std::vector<Diagnostic>& diagnostics() const { return diags_; }

  // 1-based position of `n` in the file ({0, 0} when unknown).
  static SourceLoc Loc(const YAML::Node& n);
  // "a mapping", "a list", "nothing", "'text'".
  static std::string Describe(const YAML::Node& n);

  void Error(SourceLoc loc, std::string message, std::string hint = "");
  void Error(const YAML::Node& n, std::string message, std::string hint = "");

  // Reports unknown and duplicate keys of `map` (which must be a mapping); `what` names it.
  void CheckKeys(const YAML::Node& map, const std::vector<std::string>& allowed,
                 const std::string& what);
  // Reports "`what` must be a mapping" and returns false when `n` is not one.
  bool ExpectMap(const YAML::Node& n, const std::string& what);
  // Reports a missing `key` of `parent` (with `hint`) and returns false when it is absent.
  bool Required(const YAML::Node& parent, const char* key, const std::string& what,
                const std::string& hint);

  // Each reads a scalar of its kind; `what` names the value in the message. nullopt (and one
  // diagnostic) when the node is not one or lies outside [lo, hi].
  std::optional<int64_t> Int(const YAML::Node& n, const std::string& what, int64_t lo, int64_t hi);
  std::optional<double> Number(const YAML::Node& n, const std::string& what, double lo, double hi);
  std::optional<std::string> String(const YAML::Node& n, const std::string& what);
  std::optional<bool> Bool(const YAML::Node& n, const std::string& what);
  std::optional<std::string> Choice(const YAML::Node& n, const std::string& what,
                                    const std::vector<std::string>& choices);
  std::optional<int64_t> Duration(const YAML::Node& n, const std::string& what);  // ns
  std::optional<uint64_t> Size(const YAML::Node& n, const std::string& what);     // bytes
  std::optional<uint64_t> Rate(const YAML::Node& n, const std::string& what);     // bit/s
  std::optional<double> Percent(const YAML::Node& n, const std::string& what);

 protected:
  std::string file_;
  std::vector<Diagnostic> diags_;
};

}  // namespace faultline::runner
