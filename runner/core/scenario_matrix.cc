// A scenario's `matrix:` and the expansion of a file into its runs (ExpandScenario).
#include "runner/core/scenario_parser.h"

#include <algorithm>
#include <set>

namespace faultline::runner {
namespace scenario_internal {
namespace {

// True when `n` is a mapping. A const lookup of a missing key gives an invalid node, on which
// IsMap() throws YAML::InvalidNode; this is false for it.
bool IsDefinedMap(const YAML::Node& n) { return n.IsDefined() && n.IsMap(); }

}  // namespace

// Where each matrix key lands in the scenario: {section or "" for the top level, key}.
std::pair<std::string, std::string> MatrixTarget(const std::string& key) {
  for (const char* k : {"op", "dtype", "reduce", "root", "bytes", "duration"}) {
    if (key == k) return {"workload", key};
  }
  for (const char* k : {"hosts", "ranks_per_host", "rails", "rail_gbps", "nics", "arp_retrans_ms"}) {
    if (key == k) return {"topology", key};
  }
  return {"", key};
}

bool ScenarioParser::ParseMatrix(const YAML::Node& root, std::vector<MatrixAxis>* out) {
  const YAML::Node m = root["matrix"];
  const size_t before = diags_.size();
  if (!m.IsMap() || m.size() == 0) {
    Error(m, "matrix must be a non-empty mapping of keys to lists, got " + Describe(m),
          "write e.g. 'matrix: {op: [allreduce, allgather], bytes: [1MiB, 64MiB]}'");
    return false;
  }
  std::vector<std::string> known(std::begin(kMatrixKeys), std::end(kMatrixKeys));
  CheckKeys(m, known, "matrix");
  std::vector<MatrixAxis>& axes = *out;
  int64_t combinations = 1;
  for (auto it = m.begin(); it != m.end(); ++it) {
    if (!it->first.IsScalar()) continue;
    const std::string key = it->first.Scalar();
    if (std::find(known.begin(), known.end(), key) == known.end()) continue;
    const YAML::Node list = it->second;
    const std::string what = "matrix." + key;
    if (!list.IsSequence() || list.size() == 0) {
      Error(list, what + " must be a non-empty list of values, got " + Describe(list),
            "write e.g. '" + key + ": [a, b]'");
      continue;
    }
    MatrixAxis axis{key, {}};
    std::set<std::string> seen;
    for (const auto& v : list) {
      if (!v.IsScalar()) {
        Error(v, what + ": every value must be a plain value, got " + Describe(v));
        continue;
      }
      if (!seen.insert(v.Scalar()).second) {
        Error(v, what + ": value '" + v.Scalar() + "' is listed twice", "list each value once");
        continue;
      }
      axis.values.push_back(v);
    }
    // The same key set both by the matrix and in its section would leave it unclear which wins.
    auto [section, field] = MatrixTarget(key);
    const YAML::Node parent = section.empty() ? root : root[section];
    if (IsDefinedMap(parent) && parent[field]) {
      Error(parent[field],
            (section.empty() ? field : section + "." + field) + " is also set by matrix." + key,
            "remove it here, or drop '" + key + "' from the matrix");
    }
    combinations *= std::max<int64_t>(1, static_cast<int64_t>(axis.values.size()));
    if (combinations > kMaxMatrixRuns) combinations = kMaxMatrixRuns + 1;
    if (!axis.values.empty()) axes.push_back(std::move(axis));
  }
  if (combinations > kMaxMatrixRuns) {
    Error(m, "matrix expands to more than " + std::to_string(kMaxMatrixRuns) + " runs",
          "split the file or shorten the lists");
  }
  return diags_.size() == before;
}

}  // namespace scenario_internal

namespace {

using scenario_internal::IsDefinedMap;
using scenario_internal::MatrixTarget;
using scenario_internal::ScenarioParser;

ExpandOutcome Expand(std::string_view yaml_text, const std::string& file,
                     const InventoryPlacement* placement) {
  const std::string text(yaml_text);
  ExpandOutcome out;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException&) {
    ScenarioParser p(file);
    out.diagnostics = p.Run(text).diagnostics;  // the syntax error, reported once
    return out;
  }
  const YAML::Node& croot = root;  // const lookups never add keys
  if (!croot.IsMap() || !croot["matrix"]) {
    ScenarioParser p(file, placement);
    ParseOutcome r = p.RunRoot(root);
    if (r.ok()) out.runs.push_back(std::move(*r.scenario));
    out.diagnostics = std::move(r.diagnostics);
    return out;
  }
  ScenarioParser matrix_parser(file);
  std::vector<ScenarioParser::MatrixAxis> axes_storage;
  const bool matrix_ok = matrix_parser.ParseMatrix(root, &axes_storage);
  const std::vector<ScenarioParser::MatrixAxis>* axes = &axes_storage;
  auto put_values = [](YAML::Node& doc, const std::string& key, const YAML::Node& value) {
    auto [section, field] = MatrixTarget(key);
    const YAML::Node& cdoc = doc;
    if (section.empty()) {
      doc[field] = value;
    } else if (IsDefinedMap(cdoc[section])) {
      YAML::Node sec = doc[section];
      sec[field] = value;
    }
  };
  if (!matrix_ok) {
    // Report the rest of the file too, validated once with the first value of every usable
    // matrix key (a key also set in its section keeps the section's value).
    YAML::Node doc = YAML::Load(text);
    for (const auto& a : *axes) {
      auto [section, field] = MatrixTarget(a.key);
      const YAML::Node& cdoc = doc;
      const bool set_there = section.empty() ? static_cast<bool>(cdoc[field])
                                             : IsDefinedMap(cdoc[section]) && cdoc[section][field];
      if (!set_there) put_values(doc, a.key, doc["matrix"][a.key][0]);
    }
    ScenarioParser p(file, placement);
    out.diagnostics = matrix_parser.diagnostics();
    for (auto& d : p.RunRoot(doc).diagnostics) out.diagnostics.push_back(std::move(d));
    std::stable_sort(out.diagnostics.begin(), out.diagnostics.end(),
                     [](const Diagnostic& a, const Diagnostic& b) {
                       return a.loc.line != b.loc.line ? a.loc.line < b.loc.line
                                                       : a.loc.column < b.loc.column;
                     });
    return out;
  }
  size_t total = 1;
  for (const auto& a : *axes) total *= a.values.size();
  // Each diagnostic once, with the first combination it occurred in and how many it hit.
  struct Seen {
    Diagnostic diag;
    std::string label;
    size_t count = 0;
  };
  std::vector<Seen> seen;
  std::vector<size_t> index(axes->size(), 0);
  for (size_t n = 0; n < total; ++n) {
    // Fresh document per combination; the matrix's own value nodes are put in place, so an
    // error in a value points at the value in the matrix.
    YAML::Node doc = YAML::Load(text);
    std::vector<std::pair<std::string, std::string>> values;
    for (size_t a = 0; a < axes->size(); ++a) {
      const std::string& key = (*axes)[a].key;
      YAML::Node value = doc["matrix"][key][index[a]];
      values.emplace_back(key, value.Scalar());
      put_values(doc, key, value);
    }
    Scenario label_holder;
    label_holder.matrix = values;
    const std::string label = label_holder.MatrixLabel();
    ScenarioParser p(file, placement);
    ParseOutcome r = p.RunRoot(doc);
    for (auto& d : r.diagnostics) {
      const std::string key = d.ToString();
      auto it = std::find_if(seen.begin(), seen.end(),
                             [&](const Seen& s) { return s.diag.ToString() == key; });
      if (it == seen.end()) {
        seen.push_back({std::move(d), label, 1});
      } else {
        ++it->count;
      }
    }
    if (r.ok()) {
      Scenario sc = std::move(*r.scenario);
      sc.base_name = sc.name;
      sc.matrix = std::move(values);
      sc.name = sc.base_name + "[" + label + "]";
      out.runs.push_back(std::move(sc));
    }
    // Next combination: the last key varies fastest.
    for (size_t a = axes->size(); a-- > 0;) {
      if (++index[a] < (*axes)[a].values.size()) break;
      index[a] = 0;
    }
  }
  for (auto& s : seen) {
    if (s.count < total) s.diag.message += " (in matrix combination " + s.label + ")";
    out.diagnostics.push_back(std::move(s.diag));
  }
  if (!out.diagnostics.empty()) out.runs.clear();
  return out;
}

}  // namespace

ExpandOutcome ExpandScenario(std::string_view yaml_text, const std::string& file,
                             const InventoryPlacement* placement) {
  // ScenarioParser::RunRoot turns a YAML exception in a section into a diagnostic; this catches one
  // in the matrix handling around it, so that a bad file never ends the process.
  try {
    return Expand(yaml_text, file, placement);
  } catch (const YAML::Exception& e) {
    ExpandOutcome out;
    out.diagnostics.push_back(
        {file, {std::max(0, e.mark.line + 1), std::max(0, e.mark.column + 1)},
         "malformed scenario: " + e.msg, ""});
    return out;
  }
}

ExpandOutcome ExpandScenarioFile(const std::string& path, const InventoryPlacement* placement) {
  auto text = scenario_internal::ReadFile(path);
  if (!text) return {{}, {scenario_internal::Unreadable(path)}};
  return ExpandScenario(*text, path, placement);
}

}  // namespace faultline::runner
