// Reading typed fault parameters from a JSON object (as built by the CLI or a scenario).
// Values may be strings with units ("200ms", "1gbit") or plain JSON numbers/booleans where the
// unit is implied by the key (documented per kind). Unknown keys are refused by CheckKeys so
// that a typo never silently becomes a default. Pure functions.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/status.h"

namespace faultline::params {

Status CheckKeys(const nlohmann::json& p, std::initializer_list<const char*> allowed);
Result<std::string> String(const nlohmann::json& p, const char* key,
                           std::optional<std::string> def);
Result<int64_t> Duration(const nlohmann::json& p, const char* key, std::optional<int64_t> def);
Result<int64_t> Int(const nlohmann::json& p, const char* key, std::optional<int64_t> def);
Result<uint64_t> Rate(const nlohmann::json& p, const char* key, std::optional<uint64_t> def);
Result<uint64_t> Size(const nlohmann::json& p, const char* key, std::optional<uint64_t> def);
Result<double> Percent(const nlohmann::json& p, const char* key, std::optional<double> def);
Result<bool> Bool(const nlohmann::json& p, const char* key, std::optional<bool> def);

}  // namespace faultline::params
