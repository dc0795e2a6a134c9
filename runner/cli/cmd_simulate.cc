// faultline simulate --gpus G[,G...] --days D --seeds S [--config FILE] [--calibration FILE]
//                    [--rate-scale X] [--ccl NAME] [--bootstrap B] --out DIR
// Prices failures in GPU-hours for one training job at each scale under fail_stop, failover
// and adaptive (runner/sim/simulator.h); writes DIR/simulation.json, simulation.md and
// simulation.html, every input beside its source.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "base/log.h"
#include "runner/cli/command.h"
#include "runner/sim/sim_report.h"
#include "runner/sim/simulator.h"

namespace faultline::cli {

void RegisterSimulate(CLI::App& app, Action* action) {
  struct Args {
    std::vector<int64_t> gpus{1024};
    double days = 365;
    int seeds = 20;
    std::string config, calibration, ccl, out;
    double rate_scale = 1;
    int bootstrap = -1;  // -1: the config's
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "simulate", "GPU-hours lost to failures at scale, per recovery policy");
  cmd->add_option("--gpus", a->gpus, "job sizes, comma-separated (e.g. 1024,10240,102400)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, int64_t{10'000'000}))
      ->capture_default_str();
  cmd->add_option("--days", a->days, "wall-clock length of the job")
      ->check(CLI::Range(0.001, 3650.0))
      ->capture_default_str();
  cmd->add_option("--seeds", a->seeds, "independent runs per scale")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--config", a->config, "YAML overrides of the model (README: Simulator)");
  cmd->add_option("--calibration", a->calibration, "a file from faultline calibrate");
  cmd->add_option("--rate-scale", a->rate_scale, "multiplies every failure rate (0: none)")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  cmd->add_option("--bootstrap", a->bootstrap,
                  "resamples of the calibration behind the intervals (0: seeds only; default: "
                  "the config's, 20)")
      ->check(CLI::Range(0, 10000));
  cmd->add_option("--ccl", a->ccl, "whose calibration prices failover (default ftccl)");
  cmd->add_option("--out", a->out, "output directory")->required();
  cmd->callback([=] {
    *action = [=] {
      sim::SimConfig c = sim::SimConfig::Defaults();
      if (!a->config.empty()) {
        std::ifstream in(a->config);
        std::error_code dir_ec;
        if (!in || std::filesystem::is_directory(a->config, dir_ec)) {
          FL_ERROR("simulate", "cannot read %s", a->config.c_str());
          return kExitBadInput;
        }
        std::stringstream text;
        text << in.rdbuf();
        const Status st = c.ApplyYaml(text.str(), a->config);
        if (!st.ok()) {
          std::fprintf(stderr, "%s\n", st.message().c_str());
          return kExitBadInput;
        }
      }
      if (!a->ccl.empty()) c.ccl = a->ccl;
      if (a->bootstrap >= 0) c.bootstrap = a->bootstrap;
      c.days = a->days;
      c.rate_scale = a->rate_scale;
      for (const int64_t g : a->gpus) {
        sim::SimConfig sc = c;
        sc.gpus = g;
        const Status st = sim::CheckSimulable(sc, a->seeds);
        if (!st.ok()) {
          FL_ERROR("simulate", "%s (--gpus %lld)", st.message().c_str(), static_cast<long long>(g));
          return kExitBadInput;
        }
      }
      std::unique_ptr<sim::Calibration> cal;
      if (!a->calibration.empty()) {
        std::ifstream in(a->calibration);
        std::stringstream text;
        text << in.rdbuf();
        const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
        auto parsed = j.is_discarded() ? Result<sim::Calibration>(InvalidArgument("not valid JSON"))
                                       : sim::Calibration::FromJson(j);
        if (!parsed.ok()) {
          FL_ERROR("simulate", "%s: %s", a->calibration.c_str(), parsed.status().message().c_str());
          return kExitBadInput;
        }
        cal = std::make_unique<sim::Calibration>(std::move(parsed).value());
      }
      std::vector<sim::ScaleResult> scales;
      sim::SimConfig first = c;
      const auto t0 = std::chrono::steady_clock::now();
      for (size_t i = 0; i < a->gpus.size(); ++i) {
        sim::SimConfig sc = c;
        sc.gpus = a->gpus[i];
        if (i == 0) first = sc;
        scales.push_back(sim::Simulate(sc, cal.get(), a->seeds));
      }
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::string cmdline = "faultline simulate --gpus ";
      for (size_t i = 0; i < a->gpus.size(); ++i) {
        cmdline += (i ? "," : "") + std::to_string(a->gpus[i]);
      }
      std::ostringstream days;
      days << a->days;
      cmdline += " --days " + days.str() + " --seeds " + std::to_string(a->seeds);
      if (!a->config.empty()) cmdline += " --config " + a->config;
      if (!a->calibration.empty()) cmdline += " --calibration " + a->calibration;
      if (a->rate_scale != 1) {
        std::ostringstream rs;
        rs << a->rate_scale;
        cmdline += " --rate-scale " + rs.str();
      }
      if (!a->ccl.empty()) cmdline += " --ccl " + a->ccl;
      if (a->bootstrap >= 0) cmdline += " --bootstrap " + std::to_string(a->bootstrap);
      const nlohmann::json j =
          sim::SimulationJson(first, scales, a->seeds, cal.get(), a->calibration, cmdline);
      std::error_code ec;
      std::filesystem::create_directories(a->out, ec);
      if (ec) {
        FL_ERROR("simulate", "cannot create %s: %s", a->out.c_str(), ec.message().c_str());
        return kExitBadInput;
      }
      const std::string md = sim::SimulationMarkdown(j);
      for (const auto& [name, text] :
           {std::pair<std::string, std::string>{"simulation.json", j.dump(2) + "\n"},
            {"simulation.md", md},
            {"simulation.html", sim::SimulationHtml(j)}}) {
        std::ofstream f(a->out + "/" + name);
        f << text;
        if (!f) {
          FL_ERROR("simulate", "cannot write %s/%s", a->out.c_str(), name.c_str());
          return kExitHarness;
        }
      }
      std::printf("%s\nsimulated in %.2f s; %s/simulation.{json,md,html}\n", md.c_str(), secs,
                  a->out.c_str());
      return kExitOk;
    };
  });
}

}  // namespace faultline::cli
