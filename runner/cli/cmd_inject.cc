// faultline inject KIND --netns NS --dev DEV [--for DUR] [params]: one fault by hand.
//
// Applies the fault, prints what was applied and observed, waits for --for (or, without it,
// until SIGINT/SIGTERM), reverts and observes again. One-shot faults (link_flap, conn_reset,
// rank_kill, qp_error, conn_corrupt) revert right after their apply.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/log.h"
#include "base/units.h"
#include "injector/injection.h"
#include "injector/journal.h"
#include "injector/policy.h"
#include "injector/realtime_scope.h"
#include "injector/registry.h"
#include "runner/cli/command.h"

namespace faultline::cli {
namespace {

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop.store(true); }

struct InjectOptions {
  std::string kind;
  std::string for_text;
  bool json = false;
  bool remove = false;
  std::string journal_dir = Journal::DefaultDir();
  std::vector<std::string> allow;
  // Kind parameters given on the command line, by JSON key.
  std::map<std::string, std::string> values;
};

void PrintStep(const char* what, const Injection& inj, const StepTiming& t) {
  std::printf("%s %s: lateness %.3f ms, call %.3f ms, observed %s\n", what,
              std::string(const_cast<Injection&>(inj).fault().Kind()).c_str(),
              static_cast<double>(t.applied - t.scheduled) / 1e6,
              static_cast<double>(t.returned - t.applied) / 1e6, t.observation.dump().c_str());
  std::fflush(stdout);
}

int Fail(const char* stage, const Status& st, int code) {
  FL_ERROR("inject", "%s: %s", stage, st.ToString().c_str());
  return code;
}

int RunInject(const InjectOptions& o) {
  nlohmann::json params = nlohmann::json::object();
  for (const auto& [k, v] : o.values) params[k] = v;
  if (o.remove) params["remove"] = true;

  std::optional<int64_t> hold_ns;
  if (!o.for_text.empty()) {
    auto d = ParseDuration(o.for_text);
    if (!d.ok()) return Fail("--for", d.status(), kExitBadInput);
    hold_ns = *d;
  }
  auto fault = CreateFault(o.kind, params);
  if (!fault.ok()) return Fail("refused", fault.status(), kExitBadInput);
  auto journal = Journal::Open(o.journal_dir);
  if (!journal.ok()) return Fail("journal", journal.status(), kExitHarness);
  auto policy = TargetPolicy::Create(o.allow, journal->get());
  if (!policy.ok()) return Fail("refused", policy.status(), kExitBadInput);

  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  auto injection = Injection::Arm(std::move(fault).value(), journal->get(), *policy);
  if (!injection.ok()) return Fail("refused", injection.status(), kExitBadInput);
  Injection& inj = **injection;
  RealtimeScope priority;  // a link_flap's transitions keep their times on a busy host
  Status st = inj.ApplyAt(MonoNow());
  if (!st.ok()) {
    Status rv = inj.RevertAt(0);
    if (!rv.ok()) Fail("revert after failed apply", rv, kExitHarness);
    return Fail("apply", st, kExitHarness);
  }
  if (!o.json) PrintStep("applied", inj, inj.apply_timing());
  if (inj.fault().Steady()) {
    if (hold_ns) {
      // Held for --for from the moment the kernel call began, not from when it was meant
      // to begin: the fault is in effect at least as long as asked.
      SleepUntil(inj.apply_timing().applied + *hold_ns, &g_stop, true);
    } else {
      if (!o.json) std::printf("holding until SIGINT or SIGTERM\n");
      std::fflush(stdout);
      while (!g_stop.load()) SleepUntil(MonoNow() + 1'000'000'000, &g_stop, true);
    }
  }
  st = inj.RevertAt(0);
  if (!st.ok()) return Fail("revert", st, kExitHarness);
  if (o.json) {
    std::cout << inj.ToJson().dump() << std::endl;
  } else {
    PrintStep("reverted", inj, inj.revert_timing());
  }
  return kExitOk;
}

}  // namespace

void RegisterInject(CLI::App& app, Action* action) {
  auto o = std::make_shared<InjectOptions>();
  std::string kinds;
  for (const FaultKindInfo& k : FaultKinds()) {
    if (k.create == nullptr) continue;
    kinds += "\n  " + std::string(k.name) + ": " + std::string(k.summary) + " [" +
             std::string(k.params) + "]";
  }
  CLI::App* cmd = app.add_subcommand(
      "inject", "Apply one fault, observe it, wait, revert and observe again. Kinds:" + kinds);
  cmd->add_option("kind", o->kind, "Fault kind")->required();
  cmd->add_option("--for", o->for_text, "How long to hold the fault (e.g. 200ms, 2s)");
  cmd->add_flag("--json", o->json, "Print the applied/reverted record as JSON");
  cmd->add_flag("--remove", o->remove, "port_drop: move the device out of the namespace");
  cmd->add_option("--journal", o->journal_dir, "Journal directory (env FAULTLINE_JOURNAL_DIR)")
      ->capture_default_str();
  cmd->add_option("--allow", o->allow,
                  "Allow NETNS/DEV or NETNS/* outside the project's namespaces (repeatable; "
                  "env FAULTLINE_ALLOW)");
  struct Param {
    const char* flag;
    const char* key;
    const char* help;
  };
  static const Param kParams[] = {
      {"--netns", "netns", "Named network namespace (/run/netns/NAME)"},
      {"--dev", "dev", "Interface in that namespace"},
      {"--side", "side", "host (the NIC port) or switch (its veth peer)"},
      {"--down", "down", "link_flap: time down per cycle"},
      {"--up", "up", "link_flap: time up per cycle"},
      {"--count", "count", "link_flap: number of cycles"},
      {"--jitter", "jitter", "link_flap / netem: jitter duration"},
      {"--seed", "seed", "Seed for random choices"},
      {"--rate", "rate", "bandwidth: rate (e.g. 100mbit, 25Gbps)"},
      {"--burst", "burst", "bandwidth: bucket size (e.g. 64KiB)"},
      {"--percent", "percent", "loss / corrupt / reorder: percentage"},
      {"--delay", "delay", "delay / reorder: delay"},
      {"--pid", "pid", "rank_pause / rank_kill: process id"},
      {"--src", "src", "conn_reset: local address"},
      {"--dst", "dst", "conn_reset: remote address"},
      {"--sport", "sport", "conn_reset: local port"},
      {"--dport", "dport", "conn_reset: remote port"},
      {"--hook", "hook", "qp_error / conn_corrupt: the rank's fault hook socket path"},
      {"--peer", "peer", "qp_error / conn_corrupt: peer rank"},
      {"--path", "path", "qp_error / conn_corrupt: rail index"},
      {"--part", "part", "conn_corrupt: payload (default) or header"},
  };
  for (const Param& p : kParams) {
    std::string key = p.key;
    cmd->add_option_function<std::string>(
        p.flag, [o, key](const std::string& v) { o->values[key] = v; }, p.help);
  }
  cmd->callback([o, action] { *action = [o] { return RunInject(*o); }; });
}

}  // namespace faultline::cli
