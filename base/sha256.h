// SHA-256 (FIPS 180-4) of a byte string, as lower-case hex: the scenario digest in report.json
// and the training model's parameter digest. Pure; thread-safe.
#pragma once

#include <string>

namespace faultline {

// Lower-case hex SHA-256 of `data` (64 characters).
std::string Sha256Hex(const std::string& data);

}  // namespace faultline
