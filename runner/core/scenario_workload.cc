// A scenario's `workload:` (collectives, train, torch_ddp) and its `policy:`.
#include "runner/core/scenario_parser.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <limits>
#include <set>

namespace faultline::runner::scenario_internal {
namespace {

const std::vector<std::string> kDtypes = {"f32", "f64", "f16", "bf16", "i32", "i64", "u8"};
const std::vector<std::string> kReduceOps = {"sum", "prod", "min", "max", "avg"};

}  // namespace

void ScenarioParser::CheckPolicy(const YAML::Node& p, const Scenario& s) {
  const RecoveryPolicyName pol = s.policy;
  const WorkloadKind kind = s.workload.kind;
  const bool training_only = pol == RecoveryPolicyName::kFailStop ||
                             pol == RecoveryPolicyName::kWait ||
                             pol == RecoveryPolicyName::kAdaptive;
  if (training_only && kind != WorkloadKind::kTrain) {
    Error(p,
          std::string("policy ") + RecoveryPolicyString(pol) +
              " needs the training workload (a restart from a checkpoint, a hold between "
              "steps), and this one is " + WorkloadKindName(kind),
          "use 'workload: {kind: train, ...}', or 'policy: failover' / 'policy: shrink'");
    return;
  }
  if (pol != RecoveryPolicyName::kFailover && kind == WorkloadKind::kTorchDdp) {
    Error(p, "the torch_ddp workload runs the library's own recovery only (policy failover)",
          "drop 'policy', or use 'workload: {kind: train, ...}'");
    return;
  }
  // shrink needs CclAdapter::Shrink; wait needs the peer-loss timeout and the path events;
  // adaptive needs all of them. The CCL traits table says which library has what.
  using workload::adapters::CclTraits;
  bool (*needs)(const CclTraits&) = nullptr;
  if (pol == RecoveryPolicyName::kShrink) {
    needs = [](const CclTraits& t) { return t.can_shrink; };
  } else if (pol == RecoveryPolicyName::kWait) {
    needs = [](const CclTraits& t) { return t.emits_path_events && t.honours_peer_loss_timeout; };
  } else if (pol == RecoveryPolicyName::kAdaptive) {
    needs = [](const CclTraits& t) {
      return t.can_shrink && t.emits_path_events && t.honours_peer_loss_timeout;
    };
  }
  // A rejoin grows the group back (CclAdapter::Grow): a library that cannot grow stays
  // degraded until the job's next restart, so asking for a rejoin there is an error.
  const bool leaves_out = pol == RecoveryPolicyName::kShrink || pol == RecoveryPolicyName::kAdaptive;
  if (leaves_out && s.workload.rejoin != "never" &&
      !workload::adapters::CclTraitsOf(s.ccl).can_grow) {
    Error(p,
          std::string("workload.rejoin ") + s.workload.rejoin + " needs a library that can grow " +
              "its group; " + CclNameString(s.ccl) + "'s adapter cannot (" +
              workload::adapters::CclNamesWhere(
                  [](const workload::adapters::CclTraits& t) { return t.can_grow; }) +
              " can)",
          "use 'rejoin: never' (the job stays shrunk until its next restart)");
  }
  if (needs != nullptr && !needs(workload::adapters::CclTraitsOf(s.ccl))) {
    const std::string able = workload::adapters::CclNamesWhere(needs);
    Error(p,
          std::string("policy ") + RecoveryPolicyString(pol) + " needs a library that " +
              (pol == RecoveryPolicyName::kShrink
                   ? "can shrink its group"
                   : "reports its path events and takes a peer-loss timeout") +
              "; " + CclNameString(s.ccl) + "'s adapter cannot (" + able + " can)",
          "use 'ccl: " + able.substr(0, able.find(',')) + "', or 'policy: failover'" +
              std::string(kind == WorkloadKind::kTrain ? " / 'policy: fail_stop'" : ""));
  }
}

void ScenarioParser::ParseWorkload(const YAML::Node& n, Scenario* s) {
  if (!ExpectMap(n, "workload")) return;
  if (n["kind"]) {
    auto v = Choice(n["kind"], "workload.kind",
                    std::vector<std::string>{"collectives", "torch_ddp", "train"});
    if (!v) return;
    if (*v == "torch_ddp") {
      ParseTorchWorkload(n, s);
      return;
    }
    if (*v == "train") {
      ParseTrainWorkload(n, s);
      return;
    }
  }
  CheckKeys(n,
            {"kind", "op", "dtype", "reduce", "root", "bytes", "duration", "iters", "warmup",
             "check", "op_timeout"},
            "workload");
  Workload& w = s->workload;
  std::vector<std::string> op_names;
  for (const auto& e : kOps) op_names.push_back(e.name);
  if (Required(n, "op", "workload", "add 'op: allreduce'")) {
    if (auto v = Choice(n["op"], "workload.op", op_names)) {
      for (const auto& e : kOps) {
        if (*v == e.name) w.op = e.op;
      }
    }
  }
  if (n["dtype"]) {
    if (auto v = Choice(n["dtype"], "workload.dtype", kDtypes)) w.dtype = *v;
  }
  if (n["reduce"]) {
    if (auto v = Choice(n["reduce"], "workload.reduce", kReduceOps)) w.reduce = *v;
  }
  if (n["root"]) {
    int64_t hi = topology_ok_ ? s->topology.world_size() - 1 : std::numeric_limits<int>::max();
    if (auto v = Int(n["root"], "workload.root", 0, hi)) w.root = static_cast<int>(*v);
  }
  if (Required(n, "bytes", "workload", "add 'bytes: 16MiB'")) {
    if (auto v = Size(n["bytes"], "workload.bytes")) {
      if (*v == 0 && w.op != CollOp::kBarrier) {
        Error(n["bytes"], "workload.bytes must be > 0");
      }
      w.bytes = *v;
    }
  }
  const bool has_duration = static_cast<bool>(n["duration"]);
  const bool has_iters = static_cast<bool>(n["iters"]);
  if (has_duration && has_iters) {
    Error(n["iters"], "workload has both 'duration' and 'iters'", "keep one of the two");
  } else if (!has_duration && !has_iters) {
    Error(n, "workload needs 'duration' or 'iters'", "add e.g. 'duration: 8s'");
  }
  if (has_duration) {
    if (auto v = Duration(n["duration"], "workload.duration")) {
      if (*v <= 0) {
        Error(n["duration"], "workload.duration must be > 0");
      } else {
        w.duration_ns = *v;
      }
    }
  }
  if (has_iters) {
    if (auto v = Int(n["iters"], "workload.iters", 1, std::numeric_limits<int64_t>::max())) {
      w.iters = *v;
    }
  }
  if (n["warmup"]) {
    const YAML::Node wu = n["warmup"];
    // An integer is a count of collectives; anything else must be a duration with a unit.
    bool is_count = false;
    if (wu.IsScalar()) {
      const std::string& t = wu.Scalar();
      is_count = !t.empty() &&
                 std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
    }
    if (is_count) {
      if (auto v = Int(wu, "workload.warmup", 0, std::numeric_limits<int64_t>::max())) {
        w.warmup_iters = *v;
        if (w.iters && *v >= *w.iters) {
          Error(wu,
                "workload.warmup (" + std::to_string(*v) + " collectives) leaves no " +
                    "measured collective of " + std::to_string(*w.iters),
                "lower warmup or raise iters");
        }
      }
    } else if (auto v = Duration(wu, "workload.warmup")) {
      w.warmup_ns = *v;
      if (w.duration_ns && *v >= *w.duration_ns) {
        Error(wu,
              "workload.warmup (" + Seconds(*v) + ") is not shorter than the run (" +
                  Seconds(*w.duration_ns) + ")",
              "lower warmup or raise duration");
      }
    }
  }
  if (n["check"]) {
    if (auto v = Bool(n["check"], "workload.check")) w.check = *v;
  }
  if (n["op_timeout"]) {
    if (auto v = Duration(n["op_timeout"], "workload.op_timeout")) {
      if (*v < 100'000'000 || *v > 600'000'000'000) {
        Error(n["op_timeout"], "workload.op_timeout must be at least 100ms and at most 10m");
      } else {
        w.op_timeout_ns = *v;
      }
    }
  }
}

void ScenarioParser::ParseTrainWorkload(const YAML::Node& n, Scenario* s) {
  CheckKeys(n, {"kind", "steps", "batch", "compute", "grad_bytes", "checkpoint_every", "wait_bound",
                "rejoin"},
            "workload");
  Workload& w = s->workload;
  w.kind = WorkloadKind::kTrain;
  w.op = CollOp::kAllReduce;
  w.dtype = "f32";
  w.reduce = "sum";
  w.check = true;
  if (Required(n, "steps", "workload", "add 'steps: 200'")) {
    if (auto v = Int(n["steps"], "workload.steps", 1, 100'000'000)) w.iters = *v;
  }
  if (Required(n, "grad_bytes", "workload", "add 'grad_bytes: 4MiB'")) {
    if (auto v = Size(n["grad_bytes"], "workload.grad_bytes")) {
      if (*v < 4 || *v % 4 != 0) {
        Error(n["grad_bytes"], "workload.grad_bytes must be a positive multiple of 4 (f32 gradients)");
      } else {
        w.bytes = *v;
      }
    }
  }
  if (n["batch"]) {
    if (auto v = Int(n["batch"], "workload.batch", 1, 1'000'000)) w.batch = *v;
  }
  if (n["compute"]) {
    if (auto v = Duration(n["compute"], "workload.compute")) {
      if (*v < 0 || *v > 3'600'000'000'000LL) {
        Error(n["compute"], "workload.compute must be between 0 and 1h per step");
      } else {
        w.compute_ns = *v;
      }
    }
  }
  if (n["checkpoint_every"]) {
    if (auto v = Int(n["checkpoint_every"], "workload.checkpoint_every", 0, 100'000'000)) {
      w.checkpoint_every = *v;
    }
  }
  if (n["wait_bound"]) {
    if (auto v = Duration(n["wait_bound"], "workload.wait_bound")) {
      if (*v <= 0 || *v > 600'000'000'000LL) {
        Error(n["wait_bound"], "workload.wait_bound must be > 0 and at most 10m");
      } else {
        w.wait_bound_ns = *v;
      }
    }
  }
  if (n["rejoin"]) {
    auto v = Choice(n["rejoin"], "workload.rejoin",
                    std::vector<std::string>{"never", "on_repair", "at_checkpoint"});
    if (v) {
      w.rejoin = *v;
      if (*v == "at_checkpoint" && w.checkpoint_every == 0) {
        Error(n["rejoin"], "workload.rejoin at_checkpoint needs checkpoints",
              "add 'checkpoint_every: 20', or use 'rejoin: on_repair'");
      }
    }
  }
}

void ScenarioParser::ParseTorchWorkload(const YAML::Node& n, Scenario* s) {
  CheckKeys(n, {"kind", "script", "steps", "warmup", "args"}, "workload");
  Workload& w = s->workload;
  w.kind = WorkloadKind::kTorchDdp;
  w.op = CollOp::kAllReduce;
  w.check = false;
  if (Required(n, "steps", "workload", "add 'steps: 300'")) {
    if (auto v = Int(n["steps"], "workload.steps", 1, 100'000'000)) w.iters = *v;
  }
  if (n["warmup"]) {
    if (auto v = Int(n["warmup"], "workload.warmup", 0, 100'000'000)) w.warmup_iters = *v;
  }
  if (n["script"]) {
    const YAML::Node sc = n["script"];
    if (!sc.IsScalar() || sc.Scalar().empty()) {
      Error(sc, "workload.script must be a path, got " + Describe(sc));
    } else {
      std::filesystem::path p(sc.Scalar());
      if (p.is_relative() && file_ != "-" && !file_.empty()) {
        p = std::filesystem::path(file_).parent_path() / p;
      }
      std::error_code ec;
      if (!std::filesystem::is_regular_file(p, ec)) {
        Error(sc, "workload.script " + p.string() + " is not a file",
              "give a path relative to this scenario's folder, or drop 'script' for the "
              "reference script");
      } else {
        w.script = std::filesystem::absolute(p, ec).lexically_normal().string();
      }
    }
  }
  if (n["args"]) {
    const YAML::Node a = n["args"];
    if (!a.IsMap()) {
      Error(a, "workload.args must be a mapping of the script's options, got " + Describe(a),
            "write 'args: {hidden: 512}'");
    } else {
      for (const auto& kv : a) {
        const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
        const bool name_ok =
            !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
              return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
            });
        if (!name_ok) {
          Error(kv.first, "workload.args keys must be option names (letters, digits, - and _)");
        } else if (!kv.second.IsScalar()) {
          Error(kv.second, "workload.args." + key + " must be a scalar, got " +
                               Describe(kv.second));
        } else {
          std::string opt = key;
          std::replace(opt.begin(), opt.end(), '_', '-');
          // The runner's own options of a training rank (faultline_torch.RESERVED).
          static const std::set<std::string> kReserved = {
              "ccl",   "rank",    "size", "bootstrap", "rails",    "store-dir", "steps",
              "warmup", "timeout", "log",  "seed",      "start-at", "fault-hook"};
          if (kReserved.count(opt)) {
            Error(kv.first, "workload.args." + key + " is an option the runner passes itself",
                  "set it through the scenario (steps, warmup, seed, ...) or rename the "
                  "script's option");
          } else {
            w.script_args.emplace_back(opt, kv.second.Scalar());
          }
        }
      }
    }
  }
}

}  // namespace faultline::runner::scenario_internal
