// faultline-worker: one rank of a run (see worker.h). Started by the runner; usable by hand:
//
//   faultline-worker --ccl ftccl|gloo|nccl --rank R --size N --bootstrap IP:PORT
//       --rails ADDR[,ADDR...] [--store-dir DIR] --op OP --dtype T [--redop OP] [--root R]
//       --bytes SIZE (--iters N | --duration DUR) [--warmup N] [--check] [--timeout DUR]
//       [--init-timeout DUR] --log FILE [--seed N] [--fault-hook PATH]
//
// Exit codes: see worker.h (0 completed, 2 bad command line, 3 worker failure, 10 a CCL call
// failed or outlived its deadline).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "base/units.h"
#include "runner/worker/worker.h"
#include "workload/adapters/ccl_adapter.h"
#include "workload/collective.h"

namespace faultline::runner {
namespace {

int Usage(const std::string& what) {
  std::fprintf(stderr, "faultline-worker: %s\n", what.c_str());
  return kWorkerExitUsage;
}

int Main(int argc, char** argv) {
  CLI::App app(
      "faultline-worker: one rank of a faultline run. Runs a collective in a loop through a "
      "CCL, checks every result and logs every collective as JSON lines.");
  WorkerOptions o;
  std::string op = "allreduce", dtype = "f32", redop = "sum", bytes = "1MiB";
  std::string duration, timeout = "60s", init_timeout = "30s";
  int64_t iters = -1;
  app.add_option("--ccl", o.ccl, "ftccl|gloo (and nccl where built)")->required();
  app.add_option("--rank", o.rank, "this rank")->required()->check(CLI::NonNegativeNumber);
  app.add_option("--size", o.size, "ranks in the group")->required()->check(CLI::PositiveNumber);
  app.add_option("--bootstrap", o.bootstrap, "IP:PORT of rank 0 on the management network")
      ->required();
  app.add_option("--rails", o.rails, "this rank's rail addresses or interfaces (gloo: the first)")
      ->required()
      ->delimiter(',');
  app.add_option("--store-dir", o.store_dir,
                 "gloo, nccl: rendezvous directory seen by every rank, private to this group");
  app.add_option("--op", op, "allreduce|allgather|reducescatter|broadcast|alltoall")
      ->capture_default_str();
  app.add_option("--dtype", dtype, "f32|f64|f16|bf16|i32|i64|u8")->capture_default_str();
  app.add_option("--redop", redop, "sum|prod|min|max|avg (allreduce, reducescatter)")
      ->capture_default_str();
  app.add_option("--root", o.root, "root of broadcast")->capture_default_str();
  app.add_option("--bytes", bytes, "message size, nccl-tests convention (e.g. 16MiB)")
      ->capture_default_str();
  auto* iters_opt = app.add_option("--iters", iters, "collectives after the warm-up")
                        ->check(CLI::NonNegativeNumber);
  auto* duration_opt =
      app.add_option("--duration", duration, "run collectives for this long (e.g. 8s)");
  iters_opt->excludes(duration_opt);
  app.add_option("--warmup", o.warmup, "warm-up collectives (logged, flagged warmup)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--check", o.check, "check every result against the known values");
  app.add_option("--timeout", timeout, "deadline of one collective")->capture_default_str();
  app.add_option("--init-timeout", init_timeout, "deadline of joining the group")
      ->capture_default_str();
  app.add_option("--log", o.log_path, "per-rank log (JSON lines)")->required();
  app.add_option("--seed", o.seed, "varies the input values")->capture_default_str();
  app.add_option("--policy", o.policy,
                 "recovery policy: failover (a failed call ends the run) or shrink (go on "
                 "without a lost rank)")
      ->check(CLI::IsMember({"failover", "shrink"}))
      ->capture_default_str();
  app.add_option("--fault-hook", o.fault_hook,
                 "ftccl: serve the fault-hook protocol (injector/FAULT_HOOK.md: conn_corrupt, "
                 "qp_error) on a Unix socket at this path");
  int64_t start_at = -1;
  app.add_option("--start-at", start_at,
                 "CLOCK_MONOTONIC ns at which the first collective starts (the runner's time zero)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kWorkerExitUsage;
  }

  if (o.rank >= o.size) return Usage("--rank must be below --size");
  const auto coll = workload::ParseColl(op);
  if (!coll) return Usage("unknown --op '" + op + "' (reduce and barrier are not supported)");
  const auto type = workload::ParseDType(dtype);
  if (!type) return Usage("unknown --dtype '" + dtype + "'");
  const auto red = workload::ParseRedOp(redop);
  if (!red) return Usage("unknown --redop '" + redop + "'");
  o.op = *coll;
  o.dtype = *type;
  o.redop = *red;
  if (o.root < 0 || o.root >= o.size) return Usage("--root must name a rank");
  auto size = ParseSize(bytes);
  if (!size.ok() || *size == 0) return Usage("--bytes: give a size such as 1MiB");
  o.bytes = *size;
  if (iters_opt->count() == 0 && duration_opt->count() == 0) {
    return Usage("give --iters or --duration");
  }
  if (iters_opt->count() > 0) o.iters = iters;
  if (duration_opt->count() > 0) {
    auto d = ParseDuration(duration);
    if (!d.ok() || *d <= 0) return Usage("--duration: give a duration such as 8s");
    o.duration = std::chrono::nanoseconds(*d);
  }
  auto t = ParseDuration(timeout);
  if (!t.ok() || *t < 1000000) return Usage("--timeout: give a duration of at least 1ms");
  o.timeout = std::chrono::milliseconds(*t / 1000000);
  auto it = ParseDuration(init_timeout);
  if (!it.ok() || *it < 1000000) return Usage("--init-timeout: give a duration of at least 1ms");
  o.init_timeout = std::chrono::milliseconds(*it / 1000000);
  if (o.rails.empty()) return Usage("--rails: give at least one rail");
  if ((o.ccl == "gloo" || o.ccl == "nccl") && o.store_dir.empty()) {
    return Usage(o.ccl + " needs --store-dir");
  }
  if (!o.fault_hook.empty() && o.ccl != "ftccl") {
    return Usage("--fault-hook: " + o.ccl + " serves no fault hook (only ftccl does)");
  }
  auto adapter = workload::adapters::CreateCclAdapter(o.ccl);
  if (!adapter.ok()) return Usage(adapter.status().message());
  if (start_at >= 0) o.start_at_ns = start_at;
  return RunWorker(o);
}

}  // namespace
}  // namespace faultline::runner

int main(int argc, char** argv) { return faultline::runner::Main(argc, argv); }
