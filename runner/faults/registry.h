// The explicit registry of the runner's fault kinds: one FaultDescriptor per kind the
// injector's registry (injector/registry.h FaultKinds) can create, and no other. The table
// and its lookups are declared in runner/core/fault_kind.h (the core's view of the kinds);
// registry.cc defines FaultDescriptors(), the one list that names every kind. Immutable;
// thread-safe.
#pragma once

#include "runner/core/fault_kind.h"
