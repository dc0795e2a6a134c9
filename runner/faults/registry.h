// The explicit registry of the runner's fault kinds: one FaultDescriptor per kind the
// injector's registry (injector/registry.h FaultKinds) can create, and no other. Immutable;
// thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runner/faults/fault_descriptor.h"

namespace faultline::runner::faults {

// Every kind, in documentation order (the order error hints list them in).
const std::vector<const FaultDescriptor*>& FaultDescriptors();
// Null for an unknown name.
const FaultDescriptor* FindFaultDescriptor(std::string_view name);
// REQUIRES: `name` is a registered kind (aborts otherwise: a scenario's kinds are checked).
const FaultDescriptor& DescriptorOf(std::string_view name);
// The names of FaultDescriptors(), in its order.
std::vector<std::string> FaultKindNames();

}  // namespace faultline::runner::faults
