#include "base/exec_args.h"
#include "runner/exec/slurm_cluster.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/clock.h"
#include "base/fd.h"
#include "injector/daemon.h"
#include "injector/journal.h"
#include "injector/netlink.h"
#include "injector/netns.h"
#include "injector/registry.h"
#include "runner/exec/topology.h"

namespace faultline::runner {
namespace fs = std::filesystem;
namespace {

constexpr const char* kPartition = "fl";
constexpr const char* kClusterFile = "cluster.json";

std::string Tail(const std::string& path, size_t max_lines) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::string out;
  for (size_t i = lines.size() > max_lines ? lines.size() - max_lines : 0; i < lines.size(); ++i)
    out += "\n    " + lines[i];
  return out;
}

bool InPath(const std::string& prog) {
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/bin:/bin");
  for (std::string d; std::getline(ss, d, ':');) {
    if (!d.empty() && ::access((d + "/" + prog).c_str(), X_OK) == 0) return true;
  }
  // Daemons live in sbin, which a user's PATH may lack.
  for (const char* d : {"/usr/sbin", "/sbin"}) {
    if (::access((std::string(d) + "/" + prog).c_str(), X_OK) == 0) return true;
  }
  return false;
}

std::string Which(const std::string& prog) {
  for (const char* d : {"/usr/sbin", "/sbin"}) {
    const std::string p = std::string(d) + "/" + prog;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return prog;
}

Status WriteFile(const std::string& path, const std::string& text, mode_t mode) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out) return Status(Code::kInternal, "cannot write " + tmp);
  }
  ::chmod(tmp.c_str(), mode);
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Status(Code::kInternal, "cannot write " + path + ": " + ec.message());
  return Status::Ok();
}

// Undoes journal entries newest first; keeps going, returns the first failure.
Status UndoIds(Journal& journal, const std::vector<std::string>& ids) {
  auto entries = journal.List();
  if (!entries.ok()) return entries.status();
  Status first;
  for (auto id = ids.rbegin(); id != ids.rend(); ++id) {
    const JournalEntry* e = nullptr;
    for (const auto& x : *entries) {
      if (x.id == *id) e = &x;
    }
    if (e == nullptr) continue;  // already undone
    Status st = UndoJournalEntry(e->kind, e->undo);
    if (st.ok()) st = journal.Remove(e->id);
    if (!st.ok() && st.code() != Code::kNotFound && first.ok())
      first = st.WithContext(e->kind + " " + e->id);
  }
  return first;
}

}  // namespace

std::string DefaultClusterDir() {
  const char* d = std::getenv("FAULTLINE_CLUSTER_DIR");
  return d && *d ? d : "/run/faultline/cluster";
}

std::vector<std::string> ClusterInfo::ClientEnv() const { return {"SLURM_CONF=" + slurm_conf}; }

nlohmann::json ClusterInfo::ToJson() const {
  return {{"dir", dir},
          {"run_id", run_id},
          {"cluster_name", cluster_name},
          {"hosts", hosts},
          {"ranks_per_host", ranks_per_host},
          {"rails", rails},
          {"rail_gbps", rail_gbps},
          {"partition", partition},
          {"nodes", nodes},
          {"host_netns", host_netns},
          {"ctl_netns", ctl_netns},
          {"slurm_conf", slurm_conf},
          {"munge_socket", munge_socket},
          {"journal_dir", journal_dir},
          {"journal_ids", journal_ids}};
}

Result<ClusterInfo> ClusterInfo::FromJson(const nlohmann::json& j) {
  ClusterInfo c;
  try {
    c.dir = j.at("dir").get<std::string>();
    c.run_id = j.at("run_id").get<std::string>();
    c.cluster_name = j.at("cluster_name").get<std::string>();
    c.hosts = j.at("hosts").get<int>();
    c.ranks_per_host = j.at("ranks_per_host").get<int>();
    c.rails = j.at("rails").get<int>();
    c.rail_gbps = j.at("rail_gbps").get<double>();
    c.partition = j.at("partition").get<std::string>();
    c.nodes = j.at("nodes").get<std::vector<std::string>>();
    c.host_netns = j.at("host_netns").get<std::vector<std::string>>();
    c.ctl_netns = j.at("ctl_netns").get<std::string>();
    c.slurm_conf = j.at("slurm_conf").get<std::string>();
    c.munge_socket = j.at("munge_socket").get<std::string>();
    c.journal_dir = j.at("journal_dir").get<std::string>();
    c.journal_ids = j.at("journal_ids").get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("malformed cluster description: ") + e.what());
  }
  if (c.hosts < 1 || static_cast<int>(c.nodes.size()) != c.hosts ||
      static_cast<int>(c.host_netns.size()) != c.hosts) {
    return InvalidArgument("malformed cluster description: hosts, nodes and namespaces differ");
  }
  return c;
}

std::string SlurmConfText(const ClusterInfo& c, const std::string& hostname) {
  const std::string& d = c.dir;
  std::ostringstream o;
  o << "# Written by `faultline cluster up`; removed by `faultline cluster down`.\n"
    << "ClusterName=" << c.cluster_name << "\n"
    << "SlurmctldHost=" << hostname << "(" << kCtlAddress << ")\n"
    << "SlurmUser=root\nSlurmdUser=root\n"
    << "AuthType=auth/munge\nCredType=cred/munge\n"
    << "AuthInfo=socket=" << c.munge_socket << "\n"
    << "StateSaveLocation=" << d << "/state\n"
    << "SlurmdSpoolDir=" << d << "/spool/%n\n"
    << "SlurmctldPidFile=" << d << "/run/slurmctld.pid\n"
    << "SlurmdPidFile=" << d << "/run/slurmd-%n.pid\n"
    << "SlurmctldLogFile=" << d << "/log/slurmctld.log\n"
    << "SlurmdLogFile=" << d << "/log/slurmd-%n.log\n"
    // The machine's cgroup layout is not Slurm's business here: the ranks' processes are
    // tracked through /proc, and no task plugin confines them.
    << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
    << "SwitchType=switch/none\nMpiDefault=none\n"
    << "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n"
    << "SchedulerType=sched/builtin\n"
    << "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n"
    // A node's CPUs are what this file says, not what the shared machine has.
    << "SlurmdParameters=config_overrides\n"
    // A failed node (its slurmd killed) is noticed within seconds, and back when it returns.
    << "SlurmdTimeout=5\nSlurmctldTimeout=5\nReturnToService=2\n"
    << "InactiveLimit=0\nKillWait=2\nMinJobAge=5\nMessageTimeout=5\n";
  // One CPU per rank and one for the host's fault agent, whose step runs beside the ranks'.
  o << "NodeName=DEFAULT CPUs=" << c.ranks_per_host + 1 << " RealMemory=1000 State=UNKNOWN\n";
  for (int h = 0; h < c.hosts; ++h) {
    o << "NodeName=" << c.nodes[h] << " NodeAddr=" << NetTopology::MgmtAddress(h) << "\n";
  }
  std::string nodes;
  for (const auto& n : c.nodes) nodes += (nodes.empty() ? "" : ",") + n;
  o << "PartitionName=" << c.partition << " Nodes=" << nodes
    << " Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES\n";
  return o.str();
}

Result<std::string> ClusterCommand(const ClusterInfo& info, const std::vector<std::string>& argv,
                                   int64_t timeout_ns) {
  return RunCommandIn(info.ctl_netns, argv, info.ClientEnv(), timeout_ns);
}

Result<std::string> RunCommandIn(const std::string& netns, const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env, int64_t timeout_ns) {
  if (argv.empty()) return InvalidArgument("empty command");
  UniqueFd ns;
  if (!netns.empty()) {
    FL_ASSIGN_OR_RETURN(ns, OpenNetns(netns));
  }
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
    return ErrnoStatus("pipe", errno);
  UniqueFd out_r(out[0]), out_w(out[1]), err_r(err[0]), err_w(err[1]);
  const ExecArgs exec(argv, env);
  const pid_t pid = ::fork();
  if (pid < 0) return ErrnoStatus("fork", errno);
  if (pid == 0) {
    ::setpgid(0, 0);
    if (ns.valid() && ::setns(ns.get(), CLONE_NEWNET) != 0) ::_exit(126);
    const int in = ::open("/dev/null", O_RDONLY);
    ::dup2(in, 0);
    ::dup2(out_w.get(), 1);
    ::dup2(err_w.get(), 2);
    ::execvpe(exec.argv()[0], exec.argv(), exec.envp());
    ::_exit(127);
  }
  out_w.Reset();
  err_w.Reset();
  std::string o, e;
  const int64_t deadline = MonoNow() + timeout_ns;
  bool out_open = true, err_open = true, timed_out = false;
  while (out_open || err_open) {
    pollfd p[2] = {{out_r.get(), POLLIN, 0}, {err_r.get(), POLLIN, 0}};
    const int64_t left = deadline - MonoNow();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    if (::poll(p, 2, static_cast<int>(left / 1'000'000 + 1)) < 0 && errno != EINTR) break;
    char buf[4096];
    if (out_open && (p[0].revents & (POLLIN | POLLHUP))) {
      ssize_t n = ::read(out_r.get(), buf, sizeof buf);
      if (n > 0) o.append(buf, n); else out_open = false;
    }
    if (err_open && (p[1].revents & (POLLIN | POLLHUP))) {
      ssize_t n = ::read(err_r.get(), buf, sizeof buf);
      if (n > 0) e.append(buf, n); else err_open = false;
    }
  }
  if (timed_out) ::kill(-pid, SIGKILL);
  int ws = 0;
  while (::waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  const std::string what = argv[0];
  if (timed_out) return Status(Code::kUnavailable, what + " did not finish in time");
  if (WIFEXITED(ws) && WEXITSTATUS(ws) == 127)
    return NotFound(what + " not found (install slurm-wlm)");
  if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
    while (!e.empty() && e.back() == '\n') e.pop_back();
    return Status(Code::kUnavailable, what + " failed: " + (e.empty() ? "no message" : e));
  }
  return o;
}

Result<ClusterInfo> LoadCluster(const std::string& dir) {
  const std::string path = dir + "/" + kClusterFile;
  std::ifstream in(path);
  if (!in) {
    return NotFound("no cluster is up (" + path +
                    " does not exist; start one with `faultline cluster up`)");
  }
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) return InvalidArgument(path + " is not JSON");
  auto c = ClusterInfo::FromJson(j);
  if (!c.ok()) return c.status().WithContext(path);
  return c;
}

Status ClusterDown(const ClusterInfo& info) {
  const std::string jdir = info.journal_dir.empty() ? Journal::DefaultDir() : info.journal_dir;
  FL_ASSIGN_OR_RETURN(auto journal, Journal::Open(jdir));
  // cluster.json first: a cluster half taken down is not "up" any more.
  std::error_code ec;
  fs::remove(info.dir + "/" + kClusterFile, ec);
  // The fault agents' journals of its nodes, while their namespaces still exist: an agent that
  // died with its node (or was killed) leaves its directory, and maybe faults in force.
  std::vector<std::string> errors;
  for (const std::string& node : info.nodes) {
    const std::string d = jdir + "/agent-" + node;
    if (!fs::is_directory(d, ec)) continue;
    auto aj = Journal::Open(d);
    if (!aj.ok()) {
      errors.push_back(aj.status().ToString());
      continue;
    }
    const CleanupReport r = CleanupJournal(**aj);
    for (const auto& e : r.errors) errors.push_back(d + ": " + e);
    if (r.failed == 0) fs::remove(d, ec);  // only an empty directory goes
  }
  Status st = UndoIds(*journal, info.journal_ids);
  if (st.ok() && !errors.empty()) {
    std::string all;
    for (const auto& e : errors) all += (all.empty() ? "" : "; ") + e;
    return Internal("the fault agents' journals: " + all);
  }
  return st;
}

Result<ClusterInfo> ClusterUp(const ClusterOptions& o) {
  for (const char* prog : {"munged", "slurmctld", "slurmd", "srun", "sinfo", "scancel"}) {
    if (!InPath(prog)) {
      return Status(Code::kUnavailable,
                    std::string(prog) +
                        " is not installed: the cluster needs Debian's slurm-wlm and munge "
                        "(apt-get install slurm-wlm munge)");
    }
  }
  if (o.hosts < 1 || o.hosts > 64) return InvalidArgument("--hosts must be 1..64");
  if (o.ranks_per_host < 1 || o.ranks_per_host > 64)
    return InvalidArgument("--ranks-per-host must be 1..64");
  std::error_code ec;
  ClusterInfo c;
  c.dir = o.dir.empty() ? DefaultClusterDir() : o.dir;
  c.dir = fs::absolute(c.dir).lexically_normal().string();
  while (c.dir.size() > 1 && c.dir.back() == '/') c.dir.pop_back();
  if (fs::exists(c.dir + "/" + kClusterFile, ec)) {
    return Status(Code::kUnavailable,
                  "a cluster is already up in " + c.dir + " (`faultline cluster down` first)");
  }
  c.run_id = o.run_id.empty() ? NewRunId() : o.run_id;
  c.cluster_name = "fl" + c.run_id;
  c.hosts = o.hosts;
  c.ranks_per_host = o.ranks_per_host;
  c.rails = o.rails;
  c.rail_gbps = o.rail_gbps;
  c.partition = kPartition;
  c.journal_dir = o.journal_dir.empty() ? Journal::DefaultDir() : o.journal_dir;
  for (int h = 0; h < c.hosts; ++h) c.nodes.push_back("h" + std::to_string(h));
  c.munge_socket = c.dir + "/munge/socket";
  c.slurm_conf = c.dir + "/slurm.conf";
  FL_ASSIGN_OR_RETURN(auto journal, Journal::Open(c.journal_dir));

  // Whatever fails from here on takes down what was made.
  struct Undo {
    Journal* journal;
    ClusterInfo* c;
    bool armed = true;
    ~Undo() {
      if (armed) UndoIds(*journal, c->journal_ids).IgnoreError();
    }
  } undo{journal.get(), &c};

  FL_ASSIGN_OR_RETURN(std::string dir_id, CreateOwnedDir(*journal, c.dir, 0711));
  c.journal_ids.push_back(dir_id);
  for (const char* sub : {"munge", "state", "spool", "log", "run"}) {
    fs::create_directories(c.dir + "/" + sub, ec);
  }
  ::chmod((c.dir + "/munge").c_str(), 0711);

  TopologyOptions to;
  to.run_id = c.run_id;
  to.hosts = c.hosts;
  to.rails = c.rails;
  to.rail_gbps = c.rail_gbps;
  to.ranks_per_host = c.ranks_per_host;
  to.management = true;
  to.journal_dir = c.journal_dir;
  {
    auto topo = NetTopology::Build(to);
    if (!topo.ok()) return topo.status().WithContext("building the cluster's namespaces");
    for (auto& id : (*topo)->Release()) c.journal_ids.push_back(id);
    c.ctl_netns = (*topo)->switch_netns();
    for (int h = 0; h < c.hosts; ++h) c.host_netns.push_back((*topo)->host(h).netns);
  }
  // The controller's address on the management bridge.
  {
    FL_ASSIGN_OR_RETURN(NlSock sw, NlSock::ConnectInNetns(c.ctl_netns));
    FL_ASSIGN_OR_RETURN(LinkState br, GetLink(sw, NetTopology::kMgmtDev));
    FL_RETURN_IF_ERROR(AddAddress(sw, br.ifindex, std::string(kCtlAddress) + "/24"));
  }
  // Job steps and ranks that outlive their daemons are swept before the namespaces go.
  for (const std::string& ns : std::vector<std::string>{c.ctl_netns}) {
    FL_ASSIGN_OR_RETURN(std::string id, journal->Append("netns_procs", {{"netns", ns}}));
    c.journal_ids.push_back(id);
  }
  for (const std::string& ns : c.host_netns) {
    FL_ASSIGN_OR_RETURN(std::string id, journal->Append("netns_procs", {{"netns", ns}}));
    c.journal_ids.push_back(id);
  }

  // A private munge key: 1 KiB from the kernel's random source, readable by root only.
  {
    std::string key(1024, '\0');
    if (::getrandom(key.data(), key.size(), 0) != static_cast<ssize_t>(key.size()))
      return ErrnoStatus("getrandom", errno);
    FL_RETURN_IF_ERROR(WriteFile(c.dir + "/munge/key", key, 0400));
  }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  FL_RETURN_IF_ERROR(WriteFile(c.slurm_conf, SlurmConfText(c, host), 0644));
  // slurmd reads cgroup.conf next to slurm.conf even with proctrack/linuxproc; cgroup/v1
  // is what this machine's layout supports.
  FL_RETURN_IF_ERROR(WriteFile(c.dir + "/cgroup.conf", "CgroupPlugin=cgroup/v1\n", 0644));

  auto start = [&](DaemonSpec spec) -> Result<ProcessRef> {
    spec.env.push_back("SLURM_CONF=" + c.slurm_conf);
    auto d = StartDaemon(*journal, spec);
    if (!d.ok()) return d.status();
    c.journal_ids.push_back(d->journal_id);
    return d->ref;
  };
  FL_ASSIGN_OR_RETURN(ProcessRef munged,
                      start({"munged",
                             {Which("munged"), "--foreground", "--force",
                              "--key-file=" + c.dir + "/munge/key", "--socket=" + c.munge_socket,
                              "--pid-file=" + c.dir + "/munge/munged.pid",
                              "--seed-file=" + c.dir + "/munge/seed",
                              "--log-file=" + c.dir + "/log/munged.log"},
                             {},
                             "",
                             c.dir + "/log/munged.out"}));
  // munged is ready once its socket exists.
  for (int64_t until = MonoNow() + 5'000'000'000; !fs::exists(c.munge_socket, ec);) {
    if (ProcessState(munged.pid).status().code() == Code::kNotFound || MonoNow() > until) {
      return Status(Code::kUnavailable,
                    "munged did not start:" + Tail(c.dir + "/log/munged.log", 5) +
                        Tail(c.dir + "/log/munged.out", 5));
    }
    ::usleep(20'000);
  }
  FL_ASSIGN_OR_RETURN(ProcessRef ctld, start({"slurmctld",
                                              {Which("slurmctld"), "-D", "-i"},
                                              {},
                                              c.ctl_netns,
                                              c.dir + "/log/slurmctld.out"}));
  std::vector<ProcessRef> slurmds;
  for (int h = 0; h < c.hosts; ++h) {
    FL_ASSIGN_OR_RETURN(ProcessRef d, start({"slurmd " + c.nodes[h],
                                             {Which("slurmd"), "-D", "-N", c.nodes[h]},
                                             {},
                                             c.host_netns[h],
                                             c.dir + "/log/slurmd-" + c.nodes[h] + ".out"}));
    slurmds.push_back(d);
  }
  // Ready when every node is idle; a daemon that exits meanwhile is the error.
  const int64_t until = MonoNow() + o.ready_timeout_ns;
  std::string last;
  for (;;) {
    auto gone = [](const ProcessRef& r) {
      auto st = ProcessState(r.pid);
      return !st.ok() || *st == 'Z';
    };
    if (gone(ctld)) {
      return Status(Code::kUnavailable,
                    "slurmctld exited:" + Tail(c.dir + "/log/slurmctld.log", 8) +
                        Tail(c.dir + "/log/slurmctld.out", 4));
    }
    for (int h = 0; h < c.hosts; ++h) {
      if (gone(slurmds[h])) {
        return Status(Code::kUnavailable,
                      "slurmd " + c.nodes[h] + " exited (a second slurmd on one machine needs a "
                      "Slurm built with multiple-slurmd support):" +
                          Tail(c.dir + "/log/slurmd-" + c.nodes[h] + ".log", 8) +
                          Tail(c.dir + "/log/slurmd-" + c.nodes[h] + ".out", 4));
      }
    }
    auto s = ClusterCommand(c, {"sinfo", "-h", "-N", "-o", "%N %T"}, 5'000'000'000);
    if (s.ok()) {
      last = *s;
      int idle = 0;
      std::istringstream in(*s);
      for (std::string n, st; in >> n >> st;) idle += st == "idle";
      if (idle == c.hosts) break;
    } else {
      last = s.status().message();
    }
    if (MonoNow() > until) {
      return Status(Code::kUnavailable, "the cluster's nodes did not become idle: " + last);
    }
    ::usleep(200'000);
  }
  FL_RETURN_IF_ERROR(WriteFile(c.dir + "/" + kClusterFile, c.ToJson().dump(2) + "\n", 0644));
  undo.armed = false;
  return c;
}

}  // namespace faultline::runner
