#include "workload/adapters/ccl_adapter.h"

#include <utility>

namespace faultline::workload::adapters {
namespace {

struct Factory {
  const char* name;
  std::unique_ptr<CclAdapter> (*create)();
};

constexpr Factory kFactories[] = {
    {"ftccl", &NewFtcclAdapter},
#ifdef FAULTLINE_HAVE_GLOO
    {"gloo", &NewGlooAdapter},
#endif
#ifdef FAULTLINE_HAVE_NCCL
    {"nccl", &NewNcclAdapter},
#endif
};

}  // namespace

std::vector<std::string> AvailableCcls() {
  std::vector<std::string> names;
  for (const Factory& f : kFactories) names.emplace_back(f.name);
  return names;
}

Result<std::unique_ptr<CclAdapter>> CreateCclAdapter(std::string_view name) {
  for (const Factory& f : kFactories) {
    if (name == f.name) return f.create();
  }
  std::string known;
  for (const std::string& n : AvailableCcls()) known += (known.empty() ? "" : ", ") + n;
  return InvalidArgument("unknown or not built ccl '" + std::string(name) + "' (built: " + known +
                         ")");
}

}  // namespace faultline::workload::adapters
