// faultline-worker: one rank of a run (see worker.h). Started by the runner; usable by hand:
//
//   faultline-worker --ccl ftccl|gloo|nccl --rank R --size N --bootstrap IP:PORT
//       --rails ADDR|IFACE[,...] [--store-dir DIR] --op OP --dtype T [--redop OP] [--root R]
//       --bytes SIZE (--iters N | --duration DUR) [--warmup N] [--check] [--timeout DUR]
//       [--init-timeout DUR] --log FILE [--seed N] [--fault-hook PATH]
//   faultline-worker ... --workload train --steps N --grad-bytes SIZE [--batch B]
//       [--compute-ms C] [--checkpoint-every K --checkpoint-dir DIR] [--resume]
//       [--incarnation I] [--policy failover|shrink|fail_stop|wait|adaptive]
//       [--wait-bound-ms W] [--restart-cost-ms R] [--relaunch-ms L]
//
// Exit codes: see worker.h (0 completed, 2 bad command line, 3 worker failure, 10 a CCL call
// failed or outlived its deadline, 11 stopped for a restart of every rank).
#include <arpa/inet.h>
#include <netinet/in.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "base/ifaddr.h"
#include "base/units.h"
#include "runner/worker/train_model.h"
#include "runner/worker/worker.h"
#include "workload/adapters/ccl_adapter.h"
#include "workload/adapters/ccl_traits.h"
#include "workload/collective.h"

namespace faultline::runner {
namespace {

int Usage(const std::string& what) {
  std::fprintf(stderr, "faultline-worker: %s\n", what.c_str());
  return kWorkerExitUsage;
}

// A rail given as an interface name (a real host's netdev, whose address only this host
// knows) as the IPv4 address of that interface here; an address stays as it is. Every library
// then binds and advertises the same address, and the rank's log names it.
Result<std::string> RailAddress(const std::string& rail) {
  in_addr a{};
  if (::inet_pton(AF_INET, rail.c_str(), &a) == 1) return rail;
  auto addr = InterfaceIpv4(rail);
  if (!addr.ok()) {
    return NotFound("rail '" + rail + "' is not an IPv4 address, and " + addr.status().message());
  }
  return addr;
}

int Main(int argc, char** argv) {
  CLI::App app(
      "faultline-worker: one rank of a faultline run. Runs a collective in a loop through a "
      "CCL, checks every result and logs every collective as JSON lines.");
  WorkerOptions o;
  std::string op = "allreduce", dtype = "f32", redop = "sum", bytes = "1MiB";
  std::string duration, timeout = "60s", init_timeout = "30s";
  int64_t iters = -1;
  using workload::adapters::CclNamesWhere;
  using workload::adapters::CclTraits;
  app.add_option("--ccl", o.ccl,
                 CclNamesWhere([](const CclTraits& t) { return t.built_here; }) +
                     " (the libraries built here)")
      ->required();
  app.add_option("--rank", o.rank, "this rank")->required()->check(CLI::NonNegativeNumber);
  app.add_option("--size", o.size, "ranks in the group")->required()->check(CLI::PositiveNumber);
  app.add_option("--bootstrap", o.bootstrap, "IP:PORT of rank 0 on the management network")
      ->required();
  app.add_option("--rails", o.rails, "this rank's rail addresses or interfaces (gloo: the first)")
      ->required()
      ->delimiter(',');
  app.add_option("--store-dir", o.store_dir,
                 CclNamesWhere([](const CclTraits& t) { return t.needs_store_dir; }) +
                     ": rendezvous directory seen by every rank, private to this group");
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
                 "without a lost rank); train also fail_stop, wait, adaptive")
      ->check(CLI::IsMember({"failover", "shrink", "fail_stop", "wait", "adaptive"}))
      ->capture_default_str();
  app.add_option("--workload", o.workload, "collectives or train (a data-parallel training loop)")
      ->check(CLI::IsMember({"collectives", "train"}))
      ->capture_default_str();
  int64_t steps = 0, wait_bound_ms = 5000, restart_cost_ms = -1, relaunch_ms = -1;
  std::string grad_bytes;
  auto* steps_opt = app.add_option("--steps", steps, "train: training steps of the whole job");
  auto* batch_opt = app.add_option("--batch", o.batch, "train: samples per rank per step")
                        ->capture_default_str();
  auto* compute_opt =
      app.add_option("--compute-ms", o.compute_ms, "train: compute time per step (ms)")
          ->capture_default_str();
  auto* grad_opt =
      app.add_option("--grad-bytes", grad_bytes, "train: f32 gradient bytes per step (e.g. 4MiB)");
  auto* ckpt_every_opt =
      app.add_option("--checkpoint-every", o.checkpoint_every, "train: steps (0: never)")
          ->capture_default_str();
  auto* ckpt_dir_opt =
      app.add_option("--checkpoint-dir", o.checkpoint_dir, "train: this job's checkpoints");
  auto* resume_opt =
      app.add_flag("--resume", o.resume, "train: start from the newest common checkpoint");
  auto* incarnation_opt =
      app.add_option("--incarnation", o.incarnation, "train: the job's restart count (logged)")
          ->capture_default_str();
  auto* wait_opt = app.add_option("--wait-bound-ms", wait_bound_ms,
                                  "train: longest hold for a lost path (wait, adaptive)")
                       ->capture_default_str();
  auto* rejoin_opt =
      app.add_option("--rejoin", o.rejoin,
                     "train: when ranks a shrink left out rejoin after repair (shrink, adaptive)")
          ->check(CLI::IsMember({"never", "on_repair", "at_checkpoint"}))
          ->capture_default_str();
  auto* restart_opt = app.add_option("--restart-cost-ms", restart_cost_ms,
                                     "train: the restart cost measured at the last restart");
  auto* relaunch_opt = app.add_option(
      "--relaunch-ms", relaunch_ms,
      "train: the runner's detect, kill, reap and relaunch of the ranks, measured at setup");
  app.add_option("--fault-hook", o.fault_hook,
                 CclNamesWhere([](const CclTraits& t) { return t.serves_fault_hook; }) +
                     ": serve the fault-hook protocol (injector/FAULT_HOOK.md: conn_corrupt, "
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
  if (o.workload == "train") {
    for (const CLI::Option* opt : {app.get_option("--op"), app.get_option("--bytes"),
                                   app.get_option("--iters"), app.get_option("--duration"),
                                   app.get_option("--warmup"), app.get_option("--check"),
                                   app.get_option("--dtype"), app.get_option("--redop"),
                                   app.get_option("--root")}) {
      if (opt->count() > 0) {
        return Usage(opt->get_name() +
                     " is not for --workload train (it allreduces f32 gradients, always checked)");
      }
    }
    if (steps_opt->count() == 0 || steps < 1) return Usage("--steps: give at least 1 step");
    if (grad_opt->count() == 0) return Usage("--grad-bytes: give a size such as 4MiB");
    auto g = ParseSize(grad_bytes);
    if (!g.ok() || *g == 0 || *g % 4 != 0) {
      return Usage("--grad-bytes: give a positive multiple of 4 bytes (e.g. 4MiB)");
    }
    if (o.batch < 1) return Usage("--batch: give at least 1 sample");
    if (o.compute_ms < 0) return Usage("--compute-ms: give 0 or more");
    if (o.checkpoint_every < 0) return Usage("--checkpoint-every: give 0 (never) or more");
    if ((o.checkpoint_every > 0 || o.resume) && o.checkpoint_dir.empty()) {
      return Usage("--checkpoint-dir: needed with --checkpoint-every or --resume");
    }
    if (o.incarnation < 0) return Usage("--incarnation: give 0 or more");
    if (o.rejoin != "never") {
      if (o.policy != "shrink" && o.policy != "adaptive") {
        return Usage("--rejoin " + o.rejoin + ": only policies shrink and adaptive leave ranks out");
      }
      if (o.checkpoint_dir.empty()) {
        return Usage("--checkpoint-dir: needed with --rejoin (the left-out ranks wait there)");
      }
      if (o.rejoin == "at_checkpoint" && o.checkpoint_every == 0) {
        return Usage("--rejoin at_checkpoint: give --checkpoint-every");
      }
    }
    if (wait_bound_ms < 1) return Usage("--wait-bound-ms: give at least 1");
    if (restart_opt->count() > 0 && restart_cost_ms < 0) {
      return Usage("--restart-cost-ms: give 0 or more");
    }
    if (relaunch_opt->count() > 0 && relaunch_ms < 0) return Usage("--relaunch-ms: give 0 or more");
    // The f32 parameters stay exact integers only up to this many samples (train_model.h).
    const uint64_t per_step = static_cast<uint64_t>(o.size) * static_cast<uint64_t>(o.batch);
    if (static_cast<uint64_t>(o.batch) > train::kMaxSamples ||
        static_cast<uint64_t>(steps) > train::kMaxSamples / per_step) {
      return Usage("--steps x --size x --batch exceeds " + std::to_string(train::kMaxSamples) +
                   " samples (the f32 parameters would no longer be exact)");
    }
    o.steps = steps;
    o.grad_bytes = *g;
    o.wait_bound = std::chrono::milliseconds(wait_bound_ms);
    if (restart_opt->count() > 0) o.restart_cost = std::chrono::milliseconds(restart_cost_ms);
    if (relaunch_opt->count() > 0) o.relaunch_cost = std::chrono::milliseconds(relaunch_ms);
  } else {
    for (const CLI::Option* opt : {steps_opt, batch_opt, compute_opt, grad_opt, ckpt_every_opt,
                                   ckpt_dir_opt, resume_opt, incarnation_opt, wait_opt,
                                   rejoin_opt, restart_opt, relaunch_opt}) {
      if (opt->count() > 0) return Usage(opt->get_name() + " is only for --workload train");
    }
    if (o.policy != "failover" && o.policy != "shrink") {
      return Usage("--policy " + o.policy + " is only for --workload train");
    }
  }
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
  if (o.workload == "train") {
    o.bytes = o.grad_bytes;
    o.check = true;
  } else if (iters_opt->count() == 0 && duration_opt->count() == 0) {
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
  for (std::string& rail : o.rails) {
    auto addr = RailAddress(rail);
    if (!addr.ok()) {
      std::fprintf(stderr, "faultline-worker: --rails: %s\n", addr.status().message().c_str());
      return kWorkerExitInternal;
    }
    rail = *addr;
  }
  // What the library needs of the command line, from the CCL traits table; a name no row has
  // is the adapter registry's to refuse.
  if (const CclTraits* traits = workload::adapters::FindCclTraits(o.ccl)) {
    if (traits->needs_store_dir && o.store_dir.empty()) {
      return Usage(o.ccl + " needs --store-dir");
    }
    if (!o.fault_hook.empty() && !traits->serves_fault_hook) {
      return Usage("--fault-hook: " + o.ccl + " serves no fault hook (only " +
                   CclNamesWhere([](const CclTraits& t) { return t.serves_fault_hook; }) +
                   " does)");
    }
  }
  auto adapter = workload::adapters::CreateCclAdapter(o.ccl);
  if (!adapter.ok()) return Usage(adapter.status().message());
  if (start_at >= 0) o.start_at_ns = start_at;
  return RunWorker(o);
}

}  // namespace
}  // namespace faultline::runner

int main(int argc, char** argv) { return faultline::runner::Main(argc, argv); }
