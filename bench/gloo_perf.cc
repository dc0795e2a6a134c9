// gloo-perf: the ftccl-perf loop on Gloo (TCP transport), for a same-machine comparison.
//
// The ranks run the gloo adapter (workload/adapters/gloo_adapter.cc, shared with the runner's
// worker) on workload::GlooCollectives; see workload/gloo_collectives.h for which Gloo
// algorithm runs each collective. Connect and the classic algorithms wait up to --timeout.
// Rendezvous: a gloo::rendezvous::FileStore in the run's scratch directory.
// Rails: Gloo has one TCP pair per peer and no notion of rails; every rank uses its first rail
// address (127.0.1.(k+1)) and --rails only matters to ftccl-perf.
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "perf_common.h"
#include "workload/gloo_collectives.h"

namespace faultline::bench {
namespace {

using workload::GlooAllreduce;

// Which Gloo allreduce runs (FAULTLINE_GLOO_ALLREDUCE): the options API's ring or bcube, or the
// classic in-place ring_chunked or halving_doubling (input copied to the output first, timed).
constexpr const char* kAllreduceEnv = "FAULTLINE_GLOO_ALLREDUCE";
constexpr const char* kDefaultAllreduce = "ring";

std::string AllreduceAlgoName() {
  const char* v = std::getenv(kAllreduceEnv);
  return v != nullptr && *v != '\0' ? v : kDefaultAllreduce;
}

std::optional<GlooAllreduce> ParseAllreduceAlgo(const std::string& name) {
  return workload::ParseGlooAllreduce(name);
}

}  // namespace
}  // namespace faultline::bench

int main(int argc, char** argv) {
  using namespace faultline::bench;
  PerfBackend backend;
  backend.name = "gloo";
  backend.notes = {
      "gloo: TCP transport, one pair per peer; every rank uses its rail 0 address only "
      "(--rails affects ftccl-perf, not gloo-perf)",
      "gloo: allgather/broadcast/alltoall from the options API; allreduce as "
      "FAULTLINE_GLOO_ALLREDUCE says (ring|bcube: options API; ring_chunked|halving_doubling: "
      "classic, in place, input copy timed); reducescatter: classic "
      "ReduceScatterHalvingDoubling, in place (input copy timed)"};
  backend.validate = [](const PerfOptions&) {
    if (!ParseAllreduceAlgo(AllreduceAlgoName())) {
      return faultline::InvalidArgument(std::string(kAllreduceEnv) +
                                        " must be ring, bcube, ring_chunked or halving_doubling");
    }
    return Status::Ok();
  };
  backend.knobs = [](const PerfOptions& o) {
    return std::vector<std::pair<std::string, std::string>>{
        {"transport", "tcp"},
        {"rendezvous", "file_store"},
        {"address", "127.0.1.(k+1)"},
        {"allreduce", AllreduceAlgoName()},
        {"timeout_ms", std::to_string(o.timeout_s * 1000LL)}};
  };
  backend.configure = [](const PerfOptions&, faultline::workload::adapters::CclInit* init) {
    init->allreduce_algorithm = AllreduceAlgoName();
    init->init_timeout = init->op_timeout;
  };
  return PerfMain(argc, argv, backend);
}
