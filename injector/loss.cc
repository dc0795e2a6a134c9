#include "injector/loss.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "injector/params.h"

namespace faultline {
namespace {
constexpr int kSlots = 1000;
}  // namespace

Result<LossParams> LossParams::FromJson(const nlohmann::json& p) {
  FL_RETURN_IF_ERROR(params::CheckKeys(p, {"netns", "dev", "percent", "seed"}));
  LossParams out;
  FL_ASSIGN_OR_RETURN(out.netns, params::String(p, "netns", std::nullopt));
  FL_ASSIGN_OR_RETURN(out.dev, params::String(p, "dev", std::nullopt));
  FL_ASSIGN_OR_RETURN(out.percent, params::Percent(p, "percent", std::nullopt));
  FL_ASSIGN_OR_RETURN(int64_t seed, params::Int(p, "seed", 0));
  out.seed = static_cast<uint64_t>(seed);
  return out;
}

nlohmann::json LossParams::ToJson() const {
  return {{"netns", netns}, {"dev", dev}, {"percent", percent}, {"seed", seed}};
}

Result<std::unique_ptr<Fault>> LossFault::Create(const nlohmann::json& p) {
  FL_ASSIGN_OR_RETURN(LossParams params, LossParams::FromJson(p));
  return std::unique_ptr<Fault>(new LossFault(std::move(params)));
}

std::string LossFault::Rules() const {
  int drop = static_cast<int>(std::lround(params_.percent * kSlots / 100.0));
  std::string rules = "    meta protocol { ip, ip6 } counter name \"seen\"\n";
  if (drop == 0) return rules;
  if (drop >= kSlots) {
    return rules + "    meta protocol { ip, ip6 } counter name \"dropped\" drop\n";
  }
  std::vector<int> slots(kSlots);
  std::iota(slots.begin(), slots.end(), 0);
  std::mt19937_64 rng(params_.seed);
  std::shuffle(slots.begin(), slots.end(), rng);
  slots.resize(static_cast<size_t>(drop));
  std::sort(slots.begin(), slots.end());
  std::string set;
  for (size_t i = 0; i < slots.size();) {
    size_t j = i;
    while (j + 1 < slots.size() && slots[j + 1] == slots[j] + 1) ++j;
    if (!set.empty()) set.append(", ");
    set.append(std::to_string(slots[i]));
    if (j > i) {
      set.push_back('-');
      set.append(std::to_string(slots[j]));
    }
    i = j + 1;
  }
  return rules + "    meta protocol { ip, ip6 } numgen inc mod " + std::to_string(kSlots) + " { " +
         set + " } counter name \"dropped\" drop\n";
}

}  // namespace faultline
