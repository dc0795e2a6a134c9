// Network interfaces of the calling thread's network namespace and their IPv4 addresses
// (getifaddrs). Thread-safe.
#pragma once

#include <string>

#include "base/status.h"

namespace faultline {

// The first IPv4 address of interface `dev`, as text. NotFound saying whether the interface
// is missing or has no IPv4 address.
Result<std::string> InterfaceIpv4(const std::string& dev);

// The interface that holds the IPv4 address `addr` (text). NotFound when none does;
// InvalidArgument when `addr` is not an IPv4 address.
Result<std::string> InterfaceWithIpv4(const std::string& addr);

}  // namespace faultline
