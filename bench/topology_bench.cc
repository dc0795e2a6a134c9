// topology-bench: how long the embedded namespace topology of a run takes to build and to
// tear down (default 16 hosts x 4 rails, shaped, with the management network).
//
// Each repetition builds a NetTopology with a fresh run id into a private journal directory,
// checks that every namespace is there, tears it down and checks that none is left. Prints
// the per-repetition times and their median (ms); --json prints one JSON object instead.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/clock.h"
#include "injector/netns.h"
#include "runner/exec/topology.h"

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  using namespace faultline;
  using runner::NetTopology;
  CLI::App app{"topology-bench: build and teardown time of the namespace topology"};
  int hosts = 16, rails = 4, repeat = 3;
  double gbps = 1.0;
  bool no_mgmt = false, json = false;
  app.add_option("--hosts", hosts, "Hosts (namespaces)")->capture_default_str();
  app.add_option("--rails", rails, "Rails per host")->capture_default_str();
  app.add_option("--gbps", gbps, "Shaped rate per rail (0: unshaped)")->capture_default_str();
  app.add_option("--repeat", repeat, "Repetitions")->capture_default_str();
  app.add_flag("--no-mgmt", no_mgmt, "Without the management network");
  app.add_flag("--json", json, "Print JSON");
  CLI11_PARSE(app, argc, argv);

  char dir_template[] = "/tmp/fl-topology-bench-XXXXXX";
  if (::mkdtemp(dir_template) == nullptr) {
    std::perror("mkdtemp");
    return 3;
  }
  const std::string journal_dir = dir_template;
  std::vector<double> up_ms, down_ms;
  int rc = 0;
  for (int i = 0; i < repeat && rc == 0; ++i) {
    runner::TopologyOptions o;
    o.run_id = runner::NewRunId();
    o.hosts = hosts;
    o.rails = rails;
    o.rail_gbps = gbps;
    o.management = !no_mgmt;
    o.journal_dir = journal_dir;
    MonoNs t0 = MonoNow();
    auto topo = NetTopology::Build(o);
    MonoNs t1 = MonoNow();
    if (!topo.ok()) {
      std::cerr << "build failed: " << topo.status().ToString() << "\n";
      rc = 3;
      break;
    }
    std::vector<std::string> names = (*topo)->AllNetns();
    for (const std::string& ns : names) {
      if (!NetnsExists(ns)) {
        std::cerr << "namespace " << ns << " missing after build\n";
        rc = 3;
      }
    }
    MonoNs t2 = MonoNow();
    Status st = (*topo)->Teardown();
    MonoNs t3 = MonoNow();
    if (!st.ok()) {
      std::cerr << "teardown failed: " << st.ToString() << "\n";
      rc = 3;
    }
    for (const std::string& ns : names) {
      if (NetnsExists(ns)) {
        std::cerr << "namespace " << ns << " left after teardown\n";
        rc = 3;
      }
    }
    up_ms.push_back(static_cast<double>(t1 - t0) / 1e6);
    down_ms.push_back(static_cast<double>(t3 - t2) / 1e6);
    if (!json) {
      std::printf(
          "run %-6s %3d hosts x %2d rails (%zu namespaces, %d veth pairs): up %8.1f ms"
          "  down %8.1f ms\n",
          o.run_id.c_str(), hosts, rails, names.size(), hosts * (rails + !no_mgmt), up_ms.back(),
          down_ms.back());
    }
  }
  ::rmdir(journal_dir.c_str());
  if (json) {
    nlohmann::json j = {{"hosts", hosts},
                        {"rails", rails},
                        {"rail_gbps", gbps},
                        {"management", !no_mgmt},
                        {"up_ms", up_ms},
                        {"down_ms", down_ms},
                        {"up_median_ms", Median(up_ms)},
                        {"down_median_ms", Median(down_ms)},
                        {"ok", rc == 0}};
    std::cout << j.dump(2) << "\n";
  } else if (!up_ms.empty()) {
    std::printf(
        "median: up %.1f ms, down %.1f ms (down = namespaces unmounted; the kernel "
        "frees them asynchronously)\n",
        Median(up_ms), Median(down_ms));
  }
  return rc;
}
