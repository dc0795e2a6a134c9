// For tests that filter their own traffic: a forked rank moves into a network namespace of
// its own, where nft rules on loopback vanish with the process (nothing is left behind, even
// when the test fails).
#pragma once

#include <string>

namespace ftccl::testing {

// Moves the calling process into a new network namespace and brings its loopback up. Needs
// CAP_SYS_ADMIN; false with the reason in *why.
bool EnterPrivateNet(std::string* why);
// Loads `rules` with `nft -f -`; false with nft's exit status and the rules in *why.
bool Nft(const std::string& rules, std::string* why);

}  // namespace ftccl::testing
