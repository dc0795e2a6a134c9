// The verbs backend of a build without libibverbs: every entry point says so.
#include "transport/verbs/setup.h"

namespace ftccl::transport::verbs {
namespace {
Status NotBuilt() {
  return InvalidArgument(
      "the verbs transport is not available: ftccl was built without libibverbs "
      "(install libibverbs-dev and rebuild, FAULTLINE_WITH_VERBS=AUTO or ON)");
}
}  // namespace

bool Built() { return false; }

std::string RailDevice::ToString() const {
  return device + " port " + std::to_string(port) + " gid " + std::to_string(gid_index);
}

Result<RailDevice> FindRailDevice(uint32_t) { return NotBuilt(); }

Result<std::vector<std::unique_ptr<Link>>> Upgrade(const std::vector<UpgradeConn>&,
                                                   const CommOptions&, Clock::time_point) {
  return NotBuilt();
}

}  // namespace ftccl::transport::verbs
