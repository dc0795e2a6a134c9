// The IPv4 address of a network interface of the calling thread's network namespace
// (getifaddrs). Thread-safe.
#pragma once

#include <string>

#include "base/status.h"

namespace faultline {

// The first IPv4 address of interface `dev`, as text. NotFound saying whether the interface
// is missing or has no IPv4 address.
Result<std::string> InterfaceIpv4(const std::string& dev);

}  // namespace faultline
