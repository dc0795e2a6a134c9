#include "runner/exec/agent.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "base/clock.h"
#include "base/fd.h"
#include "base/ifaddr.h"
#include "base/log.h"
#include "injector/injection.h"
#include "injector/journal.h"
#include "injector/netns.h"
#include "injector/policy.h"
#include "injector/realtime_scope.h"
#include "injector/registry.h"
#include "reports/exit_code.h"
#include "runner/exec/rail_capacity.h"
#include "runner/exec/rail_sampler.h"

namespace faultline::runner {
namespace fs = std::filesystem;
namespace {

std::atomic<bool> g_agent_stop{false};
constexpr size_t kMaxRequestBytes = 1 << 20;
void OnStop(int) { g_agent_stop = true; }

std::string Env(const char* n) {
  const char* v = std::getenv(n);
  return v ? v : "";
}

bool SameToken(const std::string& a, const std::string& b) {
  if (a.size() != b.size() || a.empty()) return false;
  unsigned char d = 0;
  for (size_t i = 0; i < a.size(); ++i) d |= static_cast<unsigned char>(a[i] ^ b[i]);
  return d == 0;
}

std::map<std::string, std::string> ProcEnv(int pid) {
  std::map<std::string, std::string> env;
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  for (std::string kv; std::getline(in, kv, '\0');) {
    const auto eq = kv.find('=');
    if (eq != std::string::npos && kv.compare(0, 6, "SLURM_") == 0)
      env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

int ParentOf(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(in)), {});
  const auto close = s.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(s.substr(close + 2));
  char state;
  int ppid = -1;
  rest >> state >> ppid;
  return ppid;
}

}  // namespace

Result<int> FindSlurmTaskPid(int procid, const std::string& job, const std::string& step,
                             uint64_t netns_inode) {
  std::set<int> task;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string n = e.path().filename().string();
    if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos) continue;
    const int pid = std::stoi(n);
    auto env = ProcEnv(pid);
    if (env["SLURM_PROCID"] != std::to_string(procid)) continue;
    if (!job.empty() && env["SLURM_JOB_ID"] != job) continue;
    if (!step.empty() && env["SLURM_STEP_ID"] != step) continue;
    auto inode = ProcessNetnsInode(pid);
    if (!inode.ok() || *inode != netns_inode) continue;
    task.insert(pid);
  }
  for (int pid : task) {
    if (task.count(ParentOf(pid))) return pid;
  }
  if (task.size() == 1) return *task.begin();
  return NotFound("no process of task " + std::to_string(procid) + " (job " + job + "." + step +
                  ") on this host");
}

namespace {

// The IPv4 address of interface `dev` in namespace `netns`.
Result<std::string> Ipv4Of(const std::string& netns, const std::string& dev) {
  FL_ASSIGN_OR_RETURN(ScopedNetns in, ScopedNetns::Enter(netns));
  return InterfaceIpv4(dev);
}

class Agent {
 public:
  Agent(AgentOptions o, std::unique_ptr<Journal> j, TargetPolicy p, std::string token,
        std::string node, std::string own_netns)
      : o_(std::move(o)),
        journal_(std::move(j)),
        policy_(std::move(p)),
        token_(std::move(token)),
        node_(std::move(node)),
        own_netns_(std::move(own_netns)) {}

  int Serve(int listen_fd, int healed_at_start);

 private:
  nlohmann::json Handle(const nlohmann::json& req);
  Status CheckTarget(nlohmann::json* params);
  Status CheckPort(const std::string& netns, const std::string& dev) const;
  nlohmann::json StartRails(const nlohmann::json& req);
  nlohmann::json StopRails();
  int HealAll();
  AgentOptions o_;
  std::unique_ptr<Journal> journal_;
  TargetPolicy policy_;
  std::string token_;
  std::string node_;
  // What "." (kOwnNetns: the host's own interfaces) stands for here: this process's namespace
  // by its /run/netns name where it has one, so that the journal names it for whoever undoes it.
  std::string own_netns_;
  std::string Netns(const std::string& netns) const {
    return netns == kOwnNetns ? own_netns_ : netns;
  }
  int healed_at_start_ = 0;
  bool bye_ = false;
  std::map<std::string, std::unique_ptr<Injection>> injections_;
  std::unique_ptr<RailSampler> rails_;  // between rails_start and rails_stop
};

Status Agent::CheckTarget(nlohmann::json* params) {
  nlohmann::json& p = *params;
  if (p.contains("procid")) {
    if (!p["procid"].is_number_integer()) return InvalidArgument("procid must be an integer");
    // The task runs in the host's namespace, the one the fault names.
    FL_ASSIGN_OR_RETURN(uint64_t host_ns, NetnsInode(Netns(p.value("netns", ""))));
    FL_ASSIGN_OR_RETURN(int pid, FindSlurmTaskPid(p["procid"].get<int>(), p.value("job_id", ""),
                                                  p.value("step_id", ""), host_ns));
    p.erase("procid");
    p.erase("job_id");
    p.erase("step_id");
    p["pid"] = pid;
  }
  if (p.contains("hook")) {
    const std::string hook = p.value("hook", "");
    const std::string dir = fs::path(o_.hook_dir).lexically_normal().string();
    const std::string norm = fs::path(hook).lexically_normal().string();
    if (o_.hook_dir.empty() || norm.rfind(dir + "/", 0) != 0) {
      return PermissionDenied("fault hook " + hook + " is outside this agent's allowed directory");
    }
    return Status::Ok();
  }
  if (p.contains("netns") && p["netns"].is_string()) p["netns"] = Netns(p["netns"]);
  if (p.contains("src_dev")) {
    // A socket fault on a rail whose address only this host knows: the address of its netdev.
    const std::string dev = p.value("src_dev", "");
    FL_RETURN_IF_ERROR(CheckPort(p.value("netns", ""), dev));
    FL_ASSIGN_OR_RETURN(std::string src, Ipv4Of(p.value("netns", ""), dev));
    p.erase("src_dev");
    p["src"] = src;
    return Status::Ok();
  }
  return CheckPort(p.value("netns", ""), p.value("dev", ""));
}

Status Agent::CheckPort(const std::string& netns, const std::string& dev) const {
  for (const std::string& a : o_.allow) {
    const auto slash = a.find('/');
    const std::string ans = a.substr(0, slash), adev = slash == std::string::npos ? "" : a.substr(slash + 1);
    if (ans != netns) continue;
    if (dev.empty() || adev == "*" || adev == dev) return Status::Ok();
  }
  return PermissionDenied("this agent's allowlist does not name " + netns + "/" +
                          (dev.empty() ? "*" : dev));
}

// rails_start {ports: [{host, rail, rank?, netns, dev, rdma?: {device, port}}], period_ns,
// start_at_ns, reserve}: samples those ports of this host (only ports of the allowlist) from
// start_at_ns on this host's clock until rails_stop.
nlohmann::json Agent::StartRails(const nlohmann::json& req) {
  auto fail = [](const std::string& e) { return nlohmann::json{{"ok", false}, {"error", e}}; };
  if (rails_) return fail("this agent is already sampling its rails");
  const nlohmann::json ports = req.value("ports", nlohmann::json());
  if (!ports.is_array() || ports.empty() || ports.size() > 4096) {
    return fail("rails_start needs ports: a list of 1..4096 ports");
  }
  std::vector<RailSamplerPort> sp;
  for (const nlohmann::json& p : ports) {
    if (!p.is_object() || !p.value("host", nlohmann::json()).is_number_integer() ||
        !p.value("rail", nlohmann::json()).is_number_integer() ||
        !p.value("netns", nlohmann::json()).is_string() ||
        !p.value("dev", nlohmann::json()).is_string() || p.value("dev", "").empty()) {
      return fail("a port is not {host, rail, rank?, netns, dev, rdma?}");
    }
    RailSamplerPort q;
    q.port.host = p["host"].get<int>();
    q.port.rail = p["rail"].get<int>();
    if (p.contains("rank")) {
      if (!p["rank"].is_number_integer()) return fail("a port's rank must be an integer");
      q.port.rank = p["rank"].get<int>();
    }
    q.netns = Netns(p["netns"].get<std::string>());
    q.dev = p["dev"].get<std::string>();
    if (Status st = CheckPort(q.netns, q.dev); !st.ok()) return fail(st.ToString());
    if (p.contains("rdma")) {
      const nlohmann::json& r = p["rdma"];
      if (!r.is_object() || !r.value("device", nlohmann::json()).is_string() ||
          !r.value("port", nlohmann::json()).is_number_integer()) {
        return fail("a port's rdma is not {device, port}");
      }
      q.rdma = RdmaPortRef{r["device"].get<std::string>(), r["port"].get<int>()};
      q.port.rdma = true;
    }
    sp.push_back(std::move(q));
  }
  RailSamplerOptions o;
  const nlohmann::json period = req.value("period_ns", nlohmann::json()),
                       start = req.value("start_at_ns", nlohmann::json(0)),
                       reserve = req.value("reserve", nlohmann::json(0));
  if (!period.is_number_integer() || !start.is_number_integer() || !reserve.is_number_unsigned() ||
      reserve.get<uint64_t>() > 1'000'000) {
    return fail("rails_start needs period_ns, start_at_ns and reserve (0..1000000) as integers");
  }
  o.period_ns = period.get<int64_t>();
  o.start_at_ns = start.get<int64_t>();
  o.reserve_samples = reserve.get<size_t>();
  // What each port can carry, as this host's kernel says (null where it does not know).
  nlohmann::json capacity = nlohmann::json::array();
  for (const RailSamplerPort& q : sp) {
    InventoryRail rail;
    rail.netdev = q.dev;
    if (q.rdma) {
      rail.rdma = q.rdma->device;
      rail.port = q.rdma->port;
    }
    const RailCapacity c = ReadRailCapacity(rail);
    capacity.push_back(
        {{"bps", c.bps ? nlohmann::json(*c.bps) : nlohmann::json()},
         {"source", c.source.empty() ? nlohmann::json() : nlohmann::json(c.source)}});
  }
  auto s = RailSampler::Start(std::move(sp), o);
  if (!s.ok()) return fail(s.status().ToString());
  rails_ = std::move(s).value();
  return {{"ok", true}, {"capacity", capacity}};
}

// rails_stop -> {series (RailSeriesToJson, this host's clock), errors, late_samples}.
nlohmann::json Agent::StopRails() {
  if (!rails_) return {{"ok", false}, {"error", "this agent is not sampling its rails"}};
  rails_->Stop();
  nlohmann::json r = {{"ok", true},
                      {"series", RailSeriesToJson(rails_->series())},
                      {"errors", rails_->errors()},
                      {"late_samples", rails_->late_samples()}};
  rails_.reset();
  return r;
}

int Agent::HealAll() {
  int healed = 0;
  for (auto& [id, inj] : injections_) {
    if (inj->applied() && !inj->reverted()) {
      if (inj->RevertAt(0).ok()) ++healed;
    }
  }
  injections_.clear();
  // And whatever else the journal holds (an Arm whose apply never returned).
  healed += CleanupJournal(*journal_).undone;
  return healed;
}

nlohmann::json Agent::Handle(const nlohmann::json& req) {
  auto fail = [](const std::string& e) { return nlohmann::json{{"ok", false}, {"error", e}}; };
  const std::string op = req.value("op", "");
  if (op == "hello") {
    return {{"ok", true},
            {"node", node_},
            {"node_id", std::atoi(Env("SLURM_NODEID").c_str())},
            {"job_id", Env("SLURM_JOB_ID")},
            {"pid", ::getpid()},
            {"healed", healed_at_start_}};
  }
  if (op == "clock") return {{"ok", true}, {"t2", 0}, {"t3", 0}};  // filled by Serve
  if (op == "renew") return {{"ok", true}};
  if (op == "rails_start") return StartRails(req);
  if (op == "rails_stop") return StopRails();
  if (op == "bye") {
    bye_ = true;
    return {{"ok", true}, {"healed", HealAll()}};
  }
  if (op == "apply") {
    const std::string id = req.value("id", "");
    if (id.empty() || injections_.count(id)) return fail("apply needs a new id");
    nlohmann::json params = req.value("params", nlohmann::json::object());
    if (!params.is_object()) return fail("params must be an object");
    Status st = CheckTarget(&params);
    if (!st.ok()) return fail(st.ToString());
    auto fault = CreateFault(req.value("kind", ""), params);
    if (!fault.ok()) return fail(fault.status().ToString());
    auto inj = Injection::Arm(std::move(fault).value(), journal_.get(), policy_);
    if (!inj.ok()) return fail(inj.status().ToString());
    st = (*inj)->ApplyAt(req.value("at_ns", int64_t{0}));
    nlohmann::json r = {{"ok", true},
                        {"applied", (*inj)->applied()},
                        {"timing", (*inj)->apply_timing().ToJson()},
                        {"error", st.ok() ? nlohmann::json(nullptr) : nlohmann::json(st.ToString())}};
    injections_[id] = std::move(inj).value();
    return r;
  }
  if (op == "revert") {
    auto it = injections_.find(req.value("id", ""));
    if (it == injections_.end()) return fail("no fault " + req.value("id", "") + " applied here");
    Status st = it->second->RevertAt(req.value("at_ns", int64_t{0}));
    return {{"ok", true},
            {"reverted", it->second->reverted()},
            {"timing", it->second->revert_timing().ToJson()},
            {"error", st.ok() ? nlohmann::json(nullptr) : nlohmann::json(st.ToString())}};
  }
  return fail("unknown op '" + op + "'");
}

int Agent::Serve(int listen_fd, int healed_at_start) {
  healed_at_start_ = healed_at_start;
  UniqueFd client;
  std::string buf;
  int64_t last = MonoNow();
  const int64_t lease_ns = o_.lease_ms * 1'000'000;
  while (!g_agent_stop && !bye_) {
    pollfd p[2] = {{listen_fd, POLLIN, 0}, {client.valid() ? client.get() : -1, POLLIN, 0}};
    const int n = ::poll(p, 2, 50);
    if (n < 0 && errno != EINTR) break;
    if (MonoNow() - last > lease_ns) {
      std::fprintf(stderr, "faultline agent %s: no word from the runner for %lld ms: healing\n",
                   node_.c_str(), static_cast<long long>(o_.lease_ms));
      break;
    }
    if (n <= 0) continue;
    if (p[0].revents & POLLIN) {
      const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        if (client.valid()) {
          ::close(fd);  // one runner at a time
        } else {
          client.Reset(fd);
          const int one = 1;
          ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          buf.clear();
        }
      }
    }
    if (client.valid() && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
      const int64_t t2 = MonoNow();
      char chunk[65536];
      const ssize_t got = ::read(client.get(), chunk, sizeof chunk);
      if (got <= 0) {
        client.Reset();  // the runner may reconnect within the lease
        continue;
      }
      buf.append(chunk, got);
      if (buf.size() > kMaxRequestBytes && buf.find('\n') == std::string::npos) {
        // No request is this long: a caller that sends an endless line is dropped.
        std::fprintf(stderr, "faultline agent %s: a request line over %zu bytes: closed\n",
                     node_.c_str(), kMaxRequestBytes);
        client.Reset();
        continue;
      }
      for (size_t nl; (nl = buf.find('\n')) != std::string::npos;) {
        const std::string line = buf.substr(0, nl);
        buf.erase(0, nl + 1);
        nlohmann::json req = nlohmann::json::parse(line, nullptr, false);
        nlohmann::json resp;
        if (req.is_discarded() || !req.is_object()) {
          resp = {{"ok", false}, {"error", "not a JSON object"}};
        } else if (!SameToken(req.value("token", ""), token_)) {
          // Nothing is done for a caller without the run's token; it is dropped.
          std::fprintf(stderr, "faultline agent %s: a request without the run's token: closed\n",
                       node_.c_str());
          client.Reset();
          break;
        } else {
          last = MonoNow();
          resp = Handle(req);
          if (req.value("op", "") == "clock") {
            resp["t2"] = t2;
            resp["t3"] = MonoNow();
          }
        }
        const std::string out = resp.dump() + "\n";
        size_t off = 0;
        while (off < out.size()) {
          const ssize_t w = ::send(client.get(), out.data() + off, out.size() - off, MSG_NOSIGNAL);
          if (w <= 0) break;
          off += static_cast<size_t>(w);
        }
      }
    }
  }
  const int healed = bye_ ? 0 : HealAll();
  if (!bye_) {
    std::fprintf(stderr, "faultline agent %s: healed %d fault%s, exiting\n", node_.c_str(),
                 healed, healed == 1 ? "" : "s");
  }
  return 0;
}

}  // namespace

int RunAgent(const AgentOptions& o_in) {
  AgentOptions o = o_in;
  const std::string token = Env("FAULTLINE_AGENT_TOKEN");
  if (token.size() < 16) {
    FL_ERROR("agent", "FAULTLINE_AGENT_TOKEN (16+ characters) is not set");
    return ToInt(reports::ExitCode::kBadInput);
  }
  ::unsetenv("FAULTLINE_AGENT_TOKEN");
  std::string node = Env("SLURMD_NODENAME");
  if (node.empty()) {
    char h[256] = {};
    ::gethostname(h, sizeof h - 1);
    node = h;
  }
  if (o.listen.empty() || o.port <= 0 || o.port > 65535) {
    FL_ERROR("agent", "--listen ADDR[,ADDR...] and --port are required");
    return ToInt(reports::ExitCode::kBadInput);
  }
  std::string addr = o.listen[0];
  if (o.listen.size() > 1) {
    const int id = std::atoi(Env("SLURM_NODEID").c_str());
    if (Env("SLURM_NODEID").empty() || id < 0 || id >= static_cast<int>(o.listen.size())) {
      FL_ERROR("agent",
               "several --listen addresses need SLURM_NODEID to "
               "choose one");
      return ToInt(reports::ExitCode::kBadInput);
    }
    addr = o.listen[id];
  }
  // "N=NETNS/DEV" entries are host N's (SLURM_NODEID); plain entries every host's.
  {
    std::vector<std::string> mine;
    const std::string id = Env("SLURM_NODEID");
    for (const std::string& a : o.allow) {
      const auto eq = a.find('=');
      if (eq == std::string::npos) {
        mine.push_back(a);
      } else if (a.substr(0, eq) == id) {
        mine.push_back(a.substr(eq + 1));
      }
    }
    o.allow = std::move(mine);
  }
  // "./DEV": this host's own interfaces (an inventory host), under its namespace's name.
  const std::string own_netns = NameOfOwnNetns();
  for (std::string& a : o.allow) {
    if (a.rfind(std::string(kOwnNetns) + "/", 0) == 0) a = own_netns + a.substr(1);
  }
  if (o.journal_dir.empty()) o.journal_dir = Journal::DefaultDir() + "/agent-" + node;
  auto journal = Journal::Open(o.journal_dir);
  if (!journal.ok()) {
    FL_ERROR("agent", "%s", journal.status().ToString().c_str());
    return ToInt(reports::ExitCode::kHarnessError);
  }
  // A predecessor killed with its faults in force: undo them before anything else.
  const CleanupReport healed = CleanupJournal(**journal);
  auto policy = TargetPolicy::Create(o.allow, journal->get(), false);
  if (!policy.ok()) {
    FL_ERROR("agent", "%s", policy.status().ToString().c_str());
    return ToInt(reports::ExitCode::kBadInput);
  }
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(o.port));
  if (::inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1) {
    FL_ERROR("agent", "--listen %s is not an IPv4 address", addr.c_str());
    return ToInt(reports::ExitCode::kBadInput);
  }
  UniqueFd ls(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int one = 1;
  ::setsockopt(ls.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (!ls.valid() || ::bind(ls.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      ::listen(ls.get(), 4) != 0) {
    FL_ERROR("agent", "cannot listen on %s:%d: %s", addr.c_str(), o.port, std::strerror(errno));
    return ToInt(reports::ExitCode::kHarnessError);
  }
  struct sigaction act {};
  act.sa_handler = OnStop;
  sigemptyset(&act.sa_mask);
  ::sigaction(SIGTERM, &act, nullptr);
  ::sigaction(SIGINT, &act, nullptr);
  std::fprintf(stderr, "faultline agent %s: listening on %s:%d (healed %d on start)\n",
               node.c_str(), addr.c_str(), o.port, healed.undone);
  // Like the runner's timeline thread: it sleeps to fault times and makes short kernel calls,
  // so it may run at realtime priority and wake on time on a busy host.
  RealtimeScope priority;
  int code;
  {
    Agent agent(o, std::move(journal).value(), std::move(policy).value(), token, node, own_netns);
    code = agent.Serve(ls.get(), healed.undone);
  }
  // Every change undone, every entry gone: the agent's own journal directory goes too (rmdir
  // only removes it empty; one that still holds an entry stays for `faultline cleanup`).
  if (::rmdir(o.journal_dir.c_str()) != 0 && errno != ENOTEMPTY && errno != ENOENT) {
    std::fprintf(stderr, "faultline agent %s: rmdir %s: %s\n", node.c_str(),
                 o.journal_dir.c_str(), std::strerror(errno));
  }
  return code;
}

}  // namespace faultline::runner
