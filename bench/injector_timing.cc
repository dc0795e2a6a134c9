// injector-timing: how precisely the injector hits a fault timeline.
//
// Builds a private namespace with a veth pair, schedules N link flaps (down D, up U) on
// absolute CLOCK_MONOTONIC times through the link_flap fault unit, and prints the
// distributions of lateness (applied - scheduled) and of call latency (the rtnetlink call
// that applies a down = "apply", or an up = "revert"): p50 / p99 / max. Target: p99 < 1 ms.
#include <sched.h>
#include <sys/mman.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/units.h"
#include "injector/injection.h"
#include "injector/journal.h"
#include "injector/link_flap.h"
#include "injector/netlink.h"
#include "injector/netns.h"
#include "injector/policy.h"
#include "injector/registry.h"

namespace {

struct Dist {
  double p50 = 0, p99 = 0, max = 0;
};

Dist Summarize(std::vector<int64_t> v) {
  Dist d;
  if (v.empty()) return d;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    size_t i = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
    return static_cast<double>(v[i]) / 1e6;
  };
  d.p50 = at(0.50);
  d.p99 = at(0.99);
  d.max = static_cast<double>(v.back()) / 1e6;
  return d;
}

nlohmann::json ToJson(const Dist& d) {
  return {{"p50_ms", d.p50}, {"p99_ms", d.p99}, {"max_ms", d.max}};
}

}  // namespace

int main(int argc, char** argv) {
  using namespace faultline;
  CLI::App app{"injector-timing: lateness and call latency of scheduled link flaps"};
  int count = 1000;
  std::string down = "2ms", up = "2ms";
  bool json = false, realtime = false;
  app.add_option("--count", count, "Number of flaps")->capture_default_str();
  app.add_option("--down", down, "Down time per flap")->capture_default_str();
  app.add_option("--up", up, "Up time per flap")->capture_default_str();
  app.add_flag("--json", json, "Print JSON");
  app.add_flag("--realtime", realtime, "Run under SCHED_FIFO (if permitted)");
  CLI11_PARSE(app, argc, argv);

  if (realtime) {
    sched_param sp{};
    sp.sched_priority = 50;
    if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0) std::perror("SCHED_FIFO");
    mlockall(MCL_CURRENT | MCL_FUTURE);
  }
  std::string ns = std::string(kProjectNetnsPrefix) + "bench-" + std::to_string(::getpid());
  char dir[] = "/tmp/fl-bench-journal-XXXXXX";
  if (::mkdtemp(dir) == nullptr) return 3;
  auto journal = Journal::Open(dir);
  if (!journal.ok()) return 3;
  if (!JournalNetns(**journal, ns).ok()) return 3;
  auto owned = OwnedNetns::Create(ns);
  if (!owned.ok()) {
    std::fprintf(stderr, "injector-timing: %s\n", owned.status().ToString().c_str());
    return 3;
  }
  {
    auto sock = NlSock::ConnectInNetns(ns);
    if (!sock.ok() || !CreateVeth(*sock, "h0", "s0", -1).ok() ||
        !SetLinkUp(*sock, "h0", true).ok() || !SetLinkUp(*sock, "s0", true).ok()) {
      std::fprintf(stderr, "injector-timing: cannot build the veth pair\n");
      return 3;
    }
  }
  auto params = LinkFlapParams::FromJson(
      {{"netns", ns}, {"dev", "h0"}, {"down", down}, {"up", up}, {"count", count}});
  if (!params.ok()) {
    std::fprintf(stderr, "injector-timing: %s\n", params.status().ToString().c_str());
    return 2;
  }
  params->observe_each = false;  // measure the fault path alone
  auto policy = TargetPolicy::Create({}, journal->get(), false);
  auto inj = Injection::Arm(std::make_unique<LinkFlapFault>(*params), journal->get(), *policy);
  if (!inj.ok()) {
    std::fprintf(stderr, "injector-timing: %s\n", inj.status().ToString().c_str());
    return 3;
  }
  Status st = (*inj)->ApplyAt(MonoNow() + 20'000'000);
  if (!st.ok()) {
    std::fprintf(stderr, "injector-timing: %s\n", st.ToString().c_str());
    return 3;
  }
  (void)(*inj)->RevertAt(0);
  std::vector<int64_t> lateness, apply_call, revert_call;
  for (const FlapTransition& t : static_cast<LinkFlapFault&>((*inj)->fault()).transitions()) {
    lateness.push_back(t.applied - t.scheduled);
    (t.up ? revert_call : apply_call).push_back(t.returned - t.applied);
  }
  inj->reset();
  Dist l = Summarize(lateness), a = Summarize(apply_call), r = Summarize(revert_call);
  if (json) {
    std::cout << nlohmann::json{{"flaps", count},           {"transitions", lateness.size()},
                                {"lateness", ToJson(l)},    {"apply_call", ToJson(a)},
                                {"revert_call", ToJson(r)}, {"target_p99_ms", 1.0},
                                {"pass", l.p99 < 1.0}}
                     .dump(2)
              << std::endl;
  } else {
    std::printf("injector-timing: %d flaps (%zu transitions), down %s up %s\n", count,
                lateness.size(), down.c_str(), up.c_str());
    std::printf("  %-26s %9s %9s %9s\n", "", "p50 ms", "p99 ms", "max ms");
    std::printf("  %-26s %9.3f %9.3f %9.3f\n", "applied - scheduled", l.p50, l.p99, l.max);
    std::printf("  %-26s %9.3f %9.3f %9.3f\n", "apply call (link down)", a.p50, a.p99, a.max);
    std::printf("  %-26s %9.3f %9.3f %9.3f\n", "revert call (link up)", r.p50, r.p99, r.max);
    std::printf("  target p99 lateness < 1 ms: %s\n", l.p99 < 1.0 ? "PASS" : "FAIL");
  }
  journal->get()->Remove((*journal->get()->List())[0].id).IgnoreError();
  ::rmdir(dir);
  return l.p99 < 1.0 ? 0 : 1;
}
