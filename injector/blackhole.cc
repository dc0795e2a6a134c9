#include "injector/blackhole.h"

#include "injector/params.h"

namespace faultline {

Result<BlackholeParams> BlackholeParams::FromJson(const nlohmann::json& p) {
  FL_RETURN_IF_ERROR(params::CheckKeys(p, {"netns", "dev"}));
  BlackholeParams out;
  FL_ASSIGN_OR_RETURN(out.netns, params::String(p, "netns", std::nullopt));
  FL_ASSIGN_OR_RETURN(out.dev, params::String(p, "dev", std::nullopt));
  return out;
}

Result<std::unique_ptr<Fault>> BlackholeFault::Create(const nlohmann::json& p) {
  FL_ASSIGN_OR_RETURN(BlackholeParams params, BlackholeParams::FromJson(p));
  return std::unique_ptr<Fault>(new BlackholeFault(std::move(params)));
}

}  // namespace faultline
