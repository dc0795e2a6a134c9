#include "base/exec_args.h"
#include "runner/exec/agent_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "base/clock.h"
#include "injector/netns.h"

namespace faultline::runner {
namespace {

// No answer of an agent is this long (a long run's rail series is a few MiB).
constexpr size_t kMaxResponseBytes = size_t{64} << 20;

constexpr int kClockRounds = 8;

std::string RandomToken() {
  unsigned char b[24];
  if (::getrandom(b, sizeof b, 0) != sizeof b) return "";
  static const char* hex = "0123456789abcdef";
  std::string t;
  for (unsigned char c : b) {
    t += hex[c >> 4];
    t += hex[c & 15];
  }
  return t;
}

}  // namespace

ClockOffset BestOffset(const std::vector<std::array<int64_t, 4>>& samples) {
  ClockOffset best;
  int64_t best_rtt = INT64_MAX;
  for (const auto& [t1, t2, t3, t4] : samples) {
    const int64_t rtt = (t4 - t1) - (t3 - t2);
    if (rtt < best_rtt) {
      best_rtt = rtt;
      best.offset_ns = ((t2 - t1) + (t3 - t4)) / 2;
      best.uncertainty_ns = std::max<int64_t>(rtt, 0) / 2;
    }
  }
  best.rounds = static_cast<int>(samples.size());
  return best;
}

Result<std::unique_ptr<AgentFleet>> AgentFleet::Start(AgentFleetOptions o) {
  if (o.nodes.empty() || o.nodes.size() != o.addrs.size())
    return InvalidArgument("agents: one address per node needed");
  std::unique_ptr<AgentFleet> f(new AgentFleet(std::move(o)));
  f->token_ = RandomToken();
  if (f->token_.empty()) return Internal("no random token for the agents");
  const int n = static_cast<int>(f->o_.nodes.size());
  f->conns_.resize(n);
  f->bufs_.resize(n);
  for (int h = 0; h < n; ++h) f->host_mu_.push_back(std::make_unique<std::mutex>());
  f->before_.resize(n);
  f->after_.resize(n);
  f->pids_.assign(n, 0);
  f->repairing_.assign(n, 0);
  f->gone_.assign(n, 0);
  f->generation_.assign(n, 0);
  f->replaced_at_.assign(n, 0);
  std::vector<int> all;
  for (int h = 0; h < n; ++h) all.push_back(h);
  FL_RETURN_IF_ERROR(f->StartStep(all));
  const int64_t deadline = MonoNow() + 20'000'000'000;
  for (int h = 0; h < n; ++h) {
    FL_RETURN_IF_ERROR(f->Connect(h, deadline).WithContext("agent of " + f->o_.nodes[h]));
    auto off = f->Measure(h);
    if (!off.ok()) return off.status().WithContext("agent of " + f->o_.nodes[h]);
    f->before_[h] = *off;
  }
  f->renew_ = std::thread([p = f.get()] { p->RenewLoop(); });
  return f;
}

Status AgentFleet::StartStep(const std::vector<int>& hosts) {
  std::string list, addrs;
  for (int h : hosts) list += (list.empty() ? "" : ",") + o_.nodes[h];
  for (const auto& a : o_.addrs) addrs += (addrs.empty() ? "" : ",") + a;
  const int n = static_cast<int>(hosts.size());
  std::vector<std::string> argv = {
      "srun", "--job-name=" + o_.job_name, "--nodes=" + std::to_string(n),
      "--ntasks=" + std::to_string(n), "--ntasks-per-node=1", "--nodelist=" + list,
      "--kill-on-bad-exit=0", "--input=none", "--output=/dev/null",
      // One node failing leaves the other agents (and their hosts' faults and samples) be.
      "--no-kill", "--error=" + o_.log_dir + "/agents-%j.%s-%t.err", "--open-mode=append"};
  if (!o_.partition.empty()) argv.push_back("--partition=" + o_.partition);
  std::string job;
  {
    std::lock_guard<std::mutex> lock(mu_);
    job = job_id_;
  }
  // A replacement is a new step of the agents' job, sharing its resources with the step of the
  // lost one (which lives on while the other hosts' agents do): a new job would wait for them.
  if (!job.empty()) {
    argv.insert(argv.begin() + 1, {"--jobid=" + job, "--overlap"});
  } else if (o_.in_allocation) {
    argv.insert(argv.begin() + 1, "--overlap");
  }
  argv.insert(argv.end(), {"--", o_.task_exe, "agent", "--port", std::to_string(o_.port),
                           "--lease-ms", std::to_string(o_.lease_ms), "--hook-dir", o_.hook_dir});
  // A replacement runs on one node, whose SLURM_NODEID is 0: it gets only its own address.
  if (n == static_cast<int>(o_.addrs.size())) {
    argv.insert(argv.end(), {"--listen", addrs});
  } else {
    argv.insert(argv.end(), {"--listen", o_.addrs[hosts[0]]});
  }
  for (const auto& a : o_.allow) {
    const auto eq = a.find('=');
    if (n == static_cast<int>(o_.addrs.size()) || eq == std::string::npos) {
      argv.insert(argv.end(), {"--allow", a});
    } else if (std::stoi(a.substr(0, eq)) == hosts[0]) {
      argv.insert(argv.end(), {"--allow", a.substr(eq + 1)});
    }
  }
  // The token reaches the agents through the step's environment, never a command line.
  std::vector<std::string> env = o_.client_env;
  env.push_back("FAULTLINE_AGENT_TOKEN=" + token_);
  UniqueFd ns;
  if (!o_.netns.empty()) {
    auto fd = OpenNetns(o_.netns);
    if (!fd.ok()) return fd.status();
    ns = std::move(fd).value();
  }
  std::string log;
  {
    std::lock_guard<std::mutex> lock(mu_);
    log = o_.log_dir + "/agents-srun" + std::to_string(steps_.size()) + ".err";
  }
  const ExecArgs exec(argv, env);
  const pid_t pid = ::fork();
  if (pid < 0) return ErrnoStatus("fork", errno);
  if (pid == 0) {
    ::setsid();
    if (ns.valid() && ::setns(ns.get(), CLONE_NEWNET) != 0) ::_exit(126);
    const int in = ::open("/dev/null", O_RDONLY);
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (in < 0 || out < 0) ::_exit(126);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    ::execvpe(exec.argv()[0], exec.argv(), exec.envp());
    ::_exit(127);
  }
  std::lock_guard<std::mutex> lock(mu_);
  steps_.push_back(pid);
  return Status::Ok();
}

Status AgentFleet::Connect(int host, int64_t deadline_ns, pid_t step) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(o_.port));
  if (::inet_pton(AF_INET, o_.addrs[host].c_str(), &sa.sin_addr) != 1)
    return InvalidArgument("not an IPv4 address: " + o_.addrs[host]);
  std::string last = "no attempt";
  while (MonoNow() < deadline_ns) {
    UniqueFd fd;
    {
      // The socket lives in the namespace it was made in (the management network's).
      std::optional<ScopedNetns> in;
      if (!o_.netns.empty()) {
        auto e = ScopedNetns::Enter(o_.netns);
        if (!e.ok()) return e.status();
        in.emplace(std::move(e).value());
      }
      fd.Reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    }
    if (!fd.valid()) return ErrnoStatus("socket", errno);
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
      const int one = 1;
      ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      conns_[host] = std::move(fd);
      bufs_[host].clear();
      auto hello = CallLocked(host, {{"op", "hello"}}, 5'000'000'000);
      if (!hello.ok()) return hello.status();
      std::lock_guard<std::mutex> lock(mu_);
      pids_[host] = hello->value("pid", 0);
      if (job_id_.empty()) job_id_ = hello->value("job_id", "");
      const int healed = hello->value("healed", 0);
      if (healed > 0) {
        events_.push_back("agent of " + o_.nodes[host] + " undid " + std::to_string(healed) +
                          " journal entr" + (healed == 1 ? "y" : "ies") + " on start");
      }
      return Status::Ok();
    }
    last = std::strerror(errno);
    // The step that should run it ended: srun could not start it there (its node is down).
    if (step > 0 && ::waitpid(step, nullptr, WNOHANG) == step) {
      std::lock_guard<std::mutex> lock(mu_);
      steps_.erase(std::remove(steps_.begin(), steps_.end(), step), steps_.end());
      return Status(Code::kUnavailable, "its srun step ended before it listened (see " +
                                            o_.log_dir + "/agents-srun*.err)");
    }
    ::usleep(50'000);
  }
  return Status(Code::kUnavailable, "no agent listening on " + o_.addrs[host] + ":" +
                                        std::to_string(o_.port) + " (" + last + ")");
}

Result<nlohmann::json> AgentFleet::CallLocked(int host, const nlohmann::json& req_in,
                                              int64_t timeout_ns) {
  if (host < 0 || host >= hosts()) return InvalidArgument("no agent for host " + std::to_string(host));
  if (!conns_[host].valid()) return Unavailable("agent of " + o_.nodes[host] + " is not connected");
  nlohmann::json req = req_in;
  req["token"] = token_;
  const std::string out = req.dump() + "\n";
  const int fd = conns_[host].get();
  for (size_t off = 0; off < out.size();) {
    const ssize_t w = ::send(fd, out.data() + off, out.size() - off, MSG_NOSIGNAL);
    if (w <= 0) {
      conns_[host].Reset();
      return Unavailable("agent of " + o_.nodes[host] + " lost: " + std::strerror(errno));
    }
    off += static_cast<size_t>(w);
  }
  const int64_t deadline = MonoNow() + timeout_ns;
  std::string& buf = bufs_[host];
  for (;;) {
    if (auto nl = buf.find('\n'); nl != std::string::npos) {
      nlohmann::json r = nlohmann::json::parse(buf.substr(0, nl), nullptr, false);
      buf.erase(0, nl + 1);
      if (r.is_discarded() || !r.is_object()) return Internal("agent sent a line that is not JSON");
      if (!r.value("ok", false)) {
        return Status(Code::kInvalidArgument,
                      "agent of " + o_.nodes[host] + ": " + r.value("error", "refused"));
      }
      return r;
    }
    const int64_t left = deadline - MonoNow();
    if (left <= 0) return Unavailable("agent of " + o_.nodes[host] + " did not answer in time");
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left / 1'000'000 + 1)) < 0 && errno != EINTR)
      return ErrnoStatus("poll", errno);
    if (p.revents == 0) continue;
    char chunk[65536];
    const ssize_t got = ::read(fd, chunk, sizeof chunk);
    if (got <= 0) {
      conns_[host].Reset();
      return Unavailable("agent of " + o_.nodes[host] + " lost (its connection closed)");
    }
    buf.append(chunk, static_cast<size_t>(got));
    if (buf.size() > kMaxResponseBytes) {
      conns_[host].Reset();
      return Internal("agent of " + o_.nodes[host] + " sent a line over " +
                      std::to_string(kMaxResponseBytes >> 20) + " MiB: dropped");
    }
  }
}

Result<nlohmann::json> AgentFleet::Call(int host, nlohmann::json req, int64_t timeout_ns) {
  if (host < 0 || host >= hosts())
    return InvalidArgument("no agent for host " + std::to_string(host));
  // Only this host's exchange waits: the others' requests and lease renewals go on while its
  // agent is replaced (or they would lapse and heal their hosts' faults early).
  std::lock_guard<std::mutex> host_lock(*host_mu_[host]);
  auto r = CallLocked(host, req, timeout_ns);
  if (r.ok() || conns_[host].valid() || stopped_) return r;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Its node is gone (a replacement could not start there): no more tries this run.
    if (gone_[host]) return r;
  }
  // The agent is gone (killed, its node failed): a fresh one on that node heals on start what
  // the lost one left in force. The request itself is not replayed.
  AddEvent("agent of " + o_.nodes[host] + " lost (" + r.status().message() + ")");
  Status st = StartStep({host});
  pid_t step = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (st.ok() && !steps_.empty()) step = steps_.back();
  }
  if (st.ok()) st = Connect(host, MonoNow() + 15'000'000'000, step);
  if (st.ok()) {
    auto off = Measure(host);
    std::lock_guard<std::mutex> lock(mu_);
    if (off.ok()) before_[host] = *off;
    events_.push_back("agent of " + o_.nodes[host] + " replaced");
    ++generation_[host];
    replaced_at_[host] = MonoNow();
  } else {
    std::lock_guard<std::mutex> lock(mu_);
    gone_[host] = 1;
    events_.push_back("agent of " + o_.nodes[host] + " could not be replaced: " + st.ToString() +
                      "; none is tried again this run");
  }
  return r;
}

void AgentFleet::AddEvent(std::string e) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(std::move(e));
}

Result<ClockOffset> AgentFleet::Measure(int host) {
  std::vector<std::array<int64_t, 4>> samples;
  for (int i = 0; i < kClockRounds; ++i) {
    const int64_t t1 = MonoNow();
    auto r = CallLocked(host, {{"op", "clock"}}, 2'000'000'000);
    const int64_t t4 = MonoNow();
    if (!r.ok()) return r.status();
    samples.push_back({t1, r->value("t2", int64_t{0}), r->value("t3", int64_t{0}), t4});
  }
  return BestOffset(samples);
}

int AgentFleet::generation(int host) const {
  std::lock_guard<std::mutex> lock(mu_);
  return generation_.at(host);
}
int64_t AgentFleet::replaced_at(int host) const {
  std::lock_guard<std::mutex> lock(mu_);
  return replaced_at_.at(host);
}

int64_t AgentFleet::ToAgent(int host, int64_t runner_ns) const {
  std::lock_guard<std::mutex> lock(mu_);
  return runner_ns + before_.at(host).offset_ns;
}
int64_t AgentFleet::FromAgent(int host, int64_t agent_ns) const {
  std::lock_guard<std::mutex> lock(mu_);
  return agent_ns - before_.at(host).offset_ns;
}

void AgentFleet::RenewLoop() {
  const int64_t every = std::max<int64_t>(o_.lease_ms / 4, 50) * 1'000'000;
  while (!stop_) {
    const int64_t next = MonoNow() + every;
    for (int h = 0; h < hosts() && !stop_; ++h) {
      {
        // Its node is gone: nothing to renew, and no repair thread to start every round.
        std::lock_guard<std::mutex> g(mu_);
        if (gone_[h]) continue;
      }
      // A request in flight renews the lease as well: never wait behind it (the timeline's
      // thread runs at realtime priority, this one does not).
      std::unique_lock<std::mutex> lock(*host_mu_[h], std::try_to_lock);
      if (!lock.owns_lock()) continue;
      auto r = CallLocked(h, {{"op", "renew"}}, 2'000'000'000);
      lock.unlock();
      if (r.ok() || stop_) continue;
      // A lost one is replaced on a thread of its own: replacing it takes seconds, in which
      // this loop goes on renewing the others.
      std::lock_guard<std::mutex> g(mu_);
      if (repairing_[h]) continue;
      repairing_[h] = 1;
      repairs_.emplace_back([this, h] {
        (void)Call(h, {{"op", "renew"}}, 2'000'000'000);
        std::lock_guard<std::mutex> done(mu_);
        repairing_[h] = 0;
      });
    }
    while (!stop_ && MonoNow() < next) ::usleep(10'000);
  }
}

Status AgentFleet::Stop() {
  if (stopped_) return Status::Ok();
  stop_ = true;
  if (renew_.joinable()) renew_.join();
  // No new repair starts now; one under way ends within its connect deadline.
  std::vector<std::thread> repairs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    repairs.swap(repairs_);
  }
  for (std::thread& t : repairs) t.join();
  stopped_ = true;
  Status first;
  for (int h = 0; h < hosts(); ++h) {
    std::lock_guard<std::mutex> host_lock(*host_mu_[h]);
    if (!conns_[h].valid()) continue;
    auto off = Measure(h);
    if (off.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      after_[h] = *off;
    }
    auto bye = CallLocked(h, {{"op", "bye"}}, 10'000'000'000);
    if (!bye.ok() && first.ok()) first = bye.status();
    conns_[h].Reset();
  }
  std::lock_guard<std::mutex> lock(mu_);
  // The agents exit after bye; their steps end with them.
  for (pid_t s : steps_) {
    const int64_t deadline = MonoNow() + 10'000'000'000;
    int ws = 0;
    while (::waitpid(s, &ws, WNOHANG) == 0) {
      if (MonoNow() > deadline) {
        ::kill(s, SIGKILL);
        ::waitpid(s, &ws, 0);
        break;
      }
      ::usleep(10'000);
    }
  }
  steps_.clear();
  return first;
}

AgentFleet::~AgentFleet() { Stop().IgnoreError(); }

nlohmann::json AgentFleet::ClockOffsetsJson() const {
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json out = nlohmann::json::array();
  for (int h = 0; h < static_cast<int>(before_.size()); ++h) {
    nlohmann::json e = {{"host", h},
                        {"node", o_.nodes[h]},
                        {"offset_us", before_[h].offset_ns / 1e3},
                        {"uncertainty_us", before_[h].uncertainty_ns / 1e3},
                        {"rounds", before_[h].rounds},
                        {"offset_after_us", nullptr},
                        {"uncertainty_after_us", nullptr}};
    if (after_[h].rounds > 0) {
      e["offset_after_us"] = after_[h].offset_ns / 1e3;
      e["uncertainty_after_us"] = after_[h].uncertainty_ns / 1e3;
    }
    out.push_back(e);
  }
  return out;
}

std::vector<std::string> AgentFleet::events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

}  // namespace faultline::runner
