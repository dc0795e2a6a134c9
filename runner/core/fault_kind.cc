#include "runner/core/fault_kind.h"

#include "base/status.h"

namespace faultline::runner::faults {

const FaultDescriptor* FindFaultDescriptor(std::string_view name) {
  for (const FaultDescriptor* d : FaultDescriptors()) {
    if (d->name == name) return d;
  }
  return nullptr;
}

const FaultDescriptor& DescriptorOf(std::string_view name) {
  const FaultDescriptor* d = FindFaultDescriptor(name);
  FL_CHECK(d != nullptr);
  return *d;
}

std::vector<std::string> FaultKindNames() {
  std::vector<std::string> out;
  for (const FaultDescriptor* d : FaultDescriptors()) out.emplace_back(d->name);
  return out;
}

}  // namespace faultline::runner::faults
