// The runner's side of the per-host agents (agent.h): the agents' Slurm step, one connection
// per host, the clock exchange and the lease renewals.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "base/fd.h"
#include "base/status.h"
#include <sys/types.h>

namespace faultline::runner {

// agent clock = runner clock + offset_ns, known to within +- uncertainty_ns (half the round
// trip of the best of `rounds` exchanges).
struct ClockOffset {
  int64_t offset_ns = 0;
  int64_t uncertainty_ns = 0;
  int rounds = 0;
};

// The offset from 4-timestamp samples (t1 sent, t2 received by the agent, t3 sent by it, t4
// received; t1/t4 on the runner's clock, t2/t3 on the agent's): the sample with the smallest
// round trip (t4 - t1) - (t3 - t2) wins. Pure; samples must not be empty.
ClockOffset BestOffset(const std::vector<std::array<int64_t, 4>>& samples);

struct AgentFleetOptions {
  std::string task_exe;                 // the faultline binary (`agent`)
  std::string netns;                    // where srun runs and the runner's sockets live
  std::vector<std::string> client_env;  // SLURM_CONF=...
  std::vector<std::string> nodes;       // node names by host
  std::vector<std::string> addrs;       // each host's management address
  std::string partition;
  std::vector<std::string> allow;       // "N=NETNS/DEV" entries (N: the host)
  std::string hook_dir;
  std::string log_dir;
  std::string job_name = "faultline-agents";
  int port = 0;
  int64_t lease_ms = 3000;
  // The runner runs inside an allocation: the agents' step shares its nodes' CPUs with the
  // ranks' (--overlap) instead of holding one of each node's.
  bool in_allocation = false;
};

class AgentFleet {
 public:
  // Starts one agent per host as a Slurm step, connects to each, says hello and measures each
  // clock offset; then renews the leases from a thread until Stop.
  static Result<std::unique_ptr<AgentFleet>> Start(AgentFleetOptions o);
  ~AgentFleet();  // Stop() if not yet

  // One request to host h's agent (the token is added); the response's "ok" is checked. A lost
  // agent (connection closed) is replaced once by a fresh one on that node, which heals what
  // the lost one left; the request fails then. Thread-safe; only host h's requests wait for
  // it (the other hosts' leases are renewed meanwhile).
  Result<nlohmann::json> Call(int host, nlohmann::json req, int64_t timeout_ns = 10'000'000'000);
  // Runner clock -> host h's agent clock and back.
  int64_t ToAgent(int host, int64_t runner_ns) const;
  int64_t FromAgent(int host, int64_t agent_ns) const;
  // Measures the offsets again (after the run), heals and ends every agent, waits for the
  // step. Returns the first failure.
  Status Stop();
  // [{host, node, offset_us, uncertainty_us, offset_after_us, rounds}] for report.json.
  nlohmann::json ClockOffsetsJson() const;
  // What happened to the agents (lost, replaced, what they healed), for the report.
  std::vector<std::string> events() const;
  int hosts() const { return static_cast<int>(conns_.size()); }
  // How many times host h's agent was replaced, and when the last replacement said hello (its
  // heal on start was done then; runner clock, 0 if never).
  int generation(int host) const;
  int64_t replaced_at(int host) const;
  // The agents' step (tests kill one through it).
  const std::vector<int>& agent_pids() const { return pids_; }

 private:
  explicit AgentFleet(AgentFleetOptions o) : o_(std::move(o)) {}
  Status StartStep(const std::vector<int>& hosts);
  // Connects to host's agent by the deadline; gives up early when `step` (its srun, if > 0)
  // has exited.
  Status Connect(int host, int64_t deadline_ns, pid_t step = 0);
  Result<nlohmann::json> CallLocked(int host, const nlohmann::json& req, int64_t timeout_ns);
  Result<ClockOffset> Measure(int host);
  void RenewLoop();
  void AddEvent(std::string e);
  AgentFleetOptions o_;
  std::string token_;
  // The agents' srun processes: children of this process but not tied to its life (no
  // PDEATHSIG, their own session), so that a runner killed with SIGKILL does not take the
  // agents' step down with it: the agents must outlive it to heal when their leases lapse.
  std::vector<pid_t> steps_;
  // Lock order: a host's mutex, then mu_. host_mu_[h] guards the exchange with host h's agent
  // (conns_[h], bufs_[h], its replacement); mu_ guards everything else below.
  std::vector<std::unique_ptr<std::mutex>> host_mu_;
  std::vector<UniqueFd> conns_;
  std::vector<std::string> bufs_;
  mutable std::mutex mu_;
  std::vector<ClockOffset> before_, after_;
  std::vector<int> pids_;
  std::string job_id_;  // the agents' Slurm job (its first step's), once known
  std::vector<int> generation_;
  std::vector<int64_t> replaced_at_;
  std::vector<std::string> events_;
  std::vector<char> repairing_;       // by host: a repair thread is replacing its agent
  std::vector<char> gone_;            // by host: its agent could not be replaced
  std::vector<std::thread> repairs_;  // joined by Stop
  std::atomic<bool> stop_{false};
  std::thread renew_;
  std::atomic<bool> stopped_{false};
};

}  // namespace faultline::runner
