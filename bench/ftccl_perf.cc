// ftccl-perf: collective throughput of ftccl over loopback TCP, nccl-tests style. The ranks run
// the ftccl adapter (workload/adapters/ftccl_adapter.cc); this file says what the header and
// the JSON show about ftccl.
//
// Rank k gets rail r at 127.0.(r+1).(k+1), so every rail is its own set of TCP connections.
// Rank 0 bootstraps on the parent's already listening socket (CclInit::bootstrap_listen_fd),
// so no rank can connect before rank 0 listens. Every knob can be overridden by its FTCCL_*
// environment variable; the effective values are printed in the header and the JSON.
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "ftccl/ftccl.h"
#include "perf_common.h"

namespace faultline::bench {
namespace {

// The options every rank starts from (what the adapter builds from the harness's CclInit);
// `rank`, addresses and the listener are filled per rank.
ftccl::CommOptions BaseOptions(const PerfOptions& o) {
  ftccl::CommOptions c;
  c.size = o.ranks;
  c.op_timeout = ftccl::Millis(o.timeout_s * 1000LL);
  return c;
}

}  // namespace
}  // namespace faultline::bench

int main(int argc, char** argv) {
  using namespace faultline::bench;
  PerfBackend backend;
  backend.name = "ftccl";
  const char* transport = std::getenv("FTCCL_TRANSPORT");
  backend.notes = {std::string("ftccl: ") + (transport ? transport : "tcp") +
                   " transport, every rail carries its own connections to every peer"};
  backend.validate = [](const PerfOptions& o) {
    ftccl::CommOptions c = BaseOptions(o);
    ftccl::Status st = ftccl::ApplyEnvOverrides(&c);
    if (!st.ok()) return faultline::InvalidArgument("FTCCL_* environment: " + st.ToString());
    return faultline::Status::Ok();
  };
  backend.knobs = [](const PerfOptions& o) {
    ftccl::CommOptions c = BaseOptions(o);
    if (!ftccl::ApplyEnvOverrides(&c).ok())
      return std::vector<std::pair<std::string, std::string>>{};
    return ftccl::EffectiveKnobs(c);
  };
  return PerfMain(argc, argv, backend);
}
