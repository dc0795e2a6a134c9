#include "runner/core/run_selection.h"

#include <algorithm>
#include <iterator>

namespace faultline::runner {

std::optional<std::string> ParseOnly(const std::string& text,
                                     std::pair<std::string, std::string>* out) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    return "--only expects KEY=VALUE, got '" + text + "'";
  }
  std::string key = text.substr(0, eq);
  if (std::find(std::begin(kMatrixKeys), std::end(kMatrixKeys), key) == std::end(kMatrixKeys)) {
    std::string keys;
    for (const char* k : kMatrixKeys) keys += std::string(keys.empty() ? "" : ", ") + k;
    return "--only: '" + key + "' is not a matrix key (one of " + keys + ")";
  }
  *out = {std::move(key), text.substr(eq + 1)};
  return std::nullopt;
}

std::optional<std::string> SelectRuns(const RunSelection& selection, std::vector<Scenario>* runs) {
  if (selection.seeds < 1) return "--seeds must be at least 1";
  std::vector<Scenario> out;
  for (const Scenario& sc : *runs) {
    if (selection.seeds == 1) {
      out.push_back(sc);
      continue;
    }
    for (const auto& [k, v] : sc.matrix) {
      if (k == "seed") {
        return sc.base_name +
               " varies seed in its matrix; --seeds would repeat its seeds (drop "
               "one of the two)";
      }
    }
    const uint64_t base = selection.base_seed.value_or(sc.seed);
    for (int i = 0; i < selection.seeds; ++i) {
      Scenario copy = sc;
      copy.seed = base + static_cast<uint64_t>(i);
      if (copy.base_name.empty()) copy.base_name = copy.name;
      copy.matrix.emplace_back("seed", std::to_string(copy.seed));
      copy.name = copy.base_name + "[" + copy.MatrixLabel() + "]";
      out.push_back(std::move(copy));
    }
  }
  std::erase_if(out, [&](const Scenario& sc) {
    for (const auto& [key, value] : selection.only) {
      for (const auto& [k, v] : sc.matrix) {
        if (k == key && v != value) return true;
      }
    }
    return false;
  });
  *runs = std::move(out);
  return std::nullopt;
}

}  // namespace faultline::runner
