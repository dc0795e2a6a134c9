#include "workload/adapters/ccl_adapter.h"

#include <utility>

#include "workload/adapters/ccl_traits.h"

namespace faultline::workload::adapters {
namespace {

// The adapters linked into this build, by their row of the CCL traits table (whose built_here
// says the same: ccl_traits_test).
struct Factory {
  CclId id;
  std::unique_ptr<CclAdapter> (*create)();
};

}  // namespace

// Each adapter's factory and the table of them, from the adapters CMake declares
// (faultline_ccl_adapter in workload/CMakeLists.txt).
#include "ccl_factories.inc"

std::vector<std::string> AvailableCcls() {
  std::vector<std::string> names;
  for (const Factory& f : kFactories) names.emplace_back(CclTraitsOf(f.id).name);
  return names;
}

Result<std::unique_ptr<CclAdapter>> CreateCclAdapter(std::string_view name) {
  for (const Factory& f : kFactories) {
    if (name == CclTraitsOf(f.id).name) return f.create();
  }
  std::string known;
  for (const std::string& n : AvailableCcls()) known += (known.empty() ? "" : ", ") + n;
  std::string message =
      "unknown or not built ccl '" + std::string(name) + "' (built: " + known + ")";
  if (const CclTraits* t = FindCclTraits(name); t != nullptr && !t->built_here) {
    message += ": " + std::string(name) + " needs " + std::string(t->built_from) + " (" +
               std::string(t->how_to_build) + ")";
  }
  return InvalidArgument(message);
}

}  // namespace faultline::workload::adapters
