#include "runner/exec/site.h"

#include "runner/exec/site_inventory.h"
#include "runner/exec/site_netns.h"
#include "runner/exec/site_slurm_fleet.h"

namespace faultline::runner {

Result<std::unique_ptr<Site>> MakeSite(const SiteContext& ctx) {
  const std::string& launcher = ctx.options->launcher;
  if (launcher == "slurm") return std::unique_ptr<Site>(std::make_unique<SlurmFleetSite>(ctx));
  if (launcher != "local") {
    return InvalidArgument("unknown launcher '" + launcher + "' (local or slurm)");
  }
  // An inventory whose hosts are all this machine (inventory.h IsLocalInventory): every rank
  // in this process's namespace.
  if (ctx.scenario->topology.is_inventory()) {
    return std::unique_ptr<Site>(std::make_unique<InventorySite>(ctx));
  }
  return std::unique_ptr<Site>(std::make_unique<NetnsSite>(ctx));
}

}  // namespace faultline::runner
