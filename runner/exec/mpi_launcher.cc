#include "runner/exec/mpi_launcher.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "base/clock.h"

namespace faultline::runner {
namespace {

namespace fs = std::filesystem;

// Output of a command (stdout), or "" when it cannot be run.
std::string Capture(const std::string& command) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  ::pclose(p);
  return out;
}

// A word the shell scripts and mpirun's app contexts take as it is.
bool PlainWord(const std::string& s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("-_.,/:=+@%").find(c) != std::string_view::npos;
  });
}

Status WriteScript(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
  f.close();
  if (!f) return ErrnoStatus("write " + path, errno);
  if (::chmod(path.c_str(), 0755) != 0) return ErrnoStatus("chmod " + path, errno);
  return Status::Ok();
}

// The wrapper of every rank (mpirun's and Hydra's): STATUS OUT ERR PROGRAM ARGS... Its output
// to its own files, its pid to STATUS.pid while it runs (the target of rank_kill and
// rank_pause), its exit status to STATUS, since the launcher reports one status for the whole
// job. The rank runs as a child of the wrapper so that its status is still recorded when a
// fault kills it.
constexpr const char* kRankScript = R"(#!/bin/sh
# One rank of an MPI world: its output to its own files, its pid to STATUS.pid, its exit
# status to STATUS.
status=$1 out=$2 err=$3
shift 3
"$@" >"$out" 2>"$err" </dev/null &
pid=$!
echo "$pid" >"$status.pid.tmp" && mv "$status.pid.tmp" "$status.pid"
wait "$pid"
code=$?
echo "$code" >"$status.tmp" && mv "$status.tmp" "$status"
exit "$code"
)";

bool OnPath(const std::string& program) {
  return !Capture("command -v '" + program + "' 2>/dev/null").empty();
}

// Run by mpirun and each orted in fresh UTS and mount namespaces: the hostname becomes the
// host's ($0), and sysfs is mounted again so that /sys/class/net lists the host namespace's
// interfaces (as `ip netns exec` does). setns/nsenter keep the sysfs of the namespace that
// mounted it, where UCX, which finds its TCP devices under /sys/class/net, sees no rail:
// pml ucx then had no path between hosts ("Destination is unreachable").
constexpr const char* kHostShell =
    "echo \"$0\" >/proc/sys/kernel/hostname && mount -t sysfs sysfs /sys";

}  // namespace

Status CheckMpichHydra() {
  if (!OnPath("mpiexec.hydra") || !OnPath("hydra_pmi_proxy")) {
    return Unavailable(
        "mpich: no mpiexec.hydra or hydra_pmi_proxy on the PATH (apt install mpich)");
  }
  return Status::Ok();
}

std::string MpichInfo(const std::string& field) {
  const std::string text = Capture("mpichversion 2>/dev/null");
  const std::string key = "MPICH " + field + ":";
  const size_t at = text.find(key);
  if (at == std::string::npos) return "";
  const size_t from = text.find_first_not_of(" \t", at + key.size());
  if (from == std::string::npos) return "";
  const size_t end = text.find('\n', from);
  return text.substr(from, end == std::string::npos ? std::string::npos : end - from);
}

Status CheckOpenMpiPml(const std::string& pml) {
  const std::string info = Capture("ompi_info --parsable 2>/dev/null");
  if (info.empty()) {
    return Unavailable("openmpi: ompi_info did not answer (apt install openmpi-bin)");
  }
  if (info.find("mca:pml:" + pml + ":") == std::string::npos) {
    return Unavailable("openmpi: this Open MPI has no pml " + pml + " (ompi_info lists none; " +
                       (pml == "ucx" ? "Debian's openmpi-bin builds it with libucx0" : "") + ")");
  }
  return Status::Ok();
}

std::string OpenMpiVersion() {
  const std::string info = Capture("ompi_info --parsable 2>/dev/null");
  const std::string key = "ompi:version:full:";
  const size_t at = info.find(key);
  if (at == std::string::npos) return "";
  const size_t end = info.find('\n', at);
  return info.substr(at + key.size(), end - at - key.size());
}

Result<std::unique_ptr<MpiLauncher>> MpiLauncher::Create(MpiLauncherOptions o) {
  if (o.hosts.empty()) return InvalidArgument("mpi launcher: no host");
  if (o.run_id.empty() || o.run_id.size() > 16 ||
      !std::all_of(o.run_id.begin(), o.run_id.end(),
                   [](char c) { return std::isdigit(c) || (c >= 'a' && c <= 'z'); })) {
    return InvalidArgument("mpi launcher: bad run id '" + o.run_id + "'");
  }
  if (o.flavour == MpiFlavour::kOpenMpi && o.pml != "ob1" && o.pml != "ucx") {
    return InvalidArgument("ccl_options.pml: '" + o.pml + "' is not a pml (ob1 or ucx)");
  }
  if (o.errors != "return" && o.errors != "fatal") {
    return InvalidArgument("ccl_options.errors: '" + o.errors + "' (return or fatal)");
  }
  for (const MpiHost& h : o.hosts) {
    if (!PlainWord(h.netns) || !PlainWord(h.mgmt_dev)) {
      return InvalidArgument("mpi launcher: host '" + h.netns + "' needs a namespace and a " +
                             "management interface (the topology's management network)");
    }
  }
  if (!PlainWord(o.data_interfaces)) {
    return InvalidArgument("mpi launcher: no data interfaces");
  }
  if (::access("/usr/bin/nsenter", X_OK) != 0 || ::access("/usr/bin/unshare", X_OK) != 0) {
    return Unavailable("mpi launcher: needs nsenter and unshare (util-linux)");
  }
  FL_RETURN_IF_ERROR(o.flavour == MpiFlavour::kMpich ? CheckMpichHydra() : CheckOpenMpiPml(o.pml));
  std::string dir = "/tmp/fl-mpi-" + o.run_id;
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (!fs::create_directories(dir + "/tmp", ec) || ec) {
    return ErrnoStatus("create " + dir, ec.value());
  }
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  if (!o.log_dir.empty()) fs::create_directories(o.log_dir, ec);
  return std::unique_ptr<MpiLauncher>(new MpiLauncher(std::move(o), std::move(dir)));
}

MpiLauncher::~MpiLauncher() {
  if (mpirun_ != nullptr) {
    (void)mpirun_->Kill(mpirun_handle_, SIGKILL);
    (void)mpirun_->Wait(mpirun_handle_, MonoNow() + 5'000'000'000LL);
    mpirun_.reset();
  }
  Sweep();
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

Status MpiLauncher::WriteFiles(const std::vector<LaunchSpec>& specs) {
  std::vector<int> slots(o_.hosts.size(), 0);
  for (const LaunchSpec& s : specs) ++slots[s.placement.host];
  std::ofstream hf(dir_ + "/hostfile", std::ios::trunc);
  for (size_t h = 0; h < o_.hosts.size(); ++h) {
    if (slots[h] == 0) continue;
    if (o_.flavour == MpiFlavour::kMpich) {
      hf << o_.hosts[h].netns << ":" << slots[h] << "\n";
    } else {
      hf << o_.hosts[h].netns << " slots=" << slots[h] << "\n";
    }
  }
  hf.close();
  if (!hf) return ErrnoStatus("write " + dir_ + "/hostfile", errno);
  std::string agent =
      "#!/bin/sh\n"
      "# The launch agent: AGENT HOST COMMAND... runs COMMAND (an orted, a hydra_pmi_proxy) in\n"
      "# HOST's network namespace, in a UTS namespace whose hostname is HOST.\n"
      "host=$1\nshift\n"
      "case \"$host\" in\n";
  for (const MpiHost& h : o_.hosts) agent += "  " + h.netns + ") ;;\n";
  // UCX (MPICH's ranks, Open MPI's pml ucx) reads its interfaces from /sys/class/net, which
  // shows the namespace of whoever mounted it; with plain nsenter UCX finds no rail and no peer
  // is reachable. Hydra's proxies enter through `ip netns exec` (a mount namespace of its own
  // with the host's sysfs); orteds enter with nsenter and mount sysfs again (kHostShell).
  const std::string enter = o_.flavour == MpiFlavour::kMpich
                                ? "exec /usr/bin/ip netns exec \"$host\" "
                                : "exec /usr/bin/nsenter --net=/run/netns/\"$host\" -- ";
  agent +=
      "  *) echo \"agent: unknown host $host\" >&2; exit 1 ;;\n"
      "esac\n" +
      enter +
      "/usr/bin/unshare --uts" + (o_.flavour == MpiFlavour::kMpich ? "" : " --mount") + " -- "
      "/bin/sh -c '" +
      (o_.flavour == MpiFlavour::kMpich ? std::string("echo \"$0\" >/proc/sys/kernel/hostname")
                                         : std::string(kHostShell)) +
      " && exec /bin/sh -c \"$1\"' "
      "\"$host\" \"$*\"\n";
  FL_RETURN_IF_ERROR(WriteScript(dir_ + "/agent", agent));
  return WriteScript(dir_ + "/rank", kRankScript);
}

std::vector<std::string> MpiLauncher::BuildCommand(const std::vector<LaunchSpec>& specs) const {
  if (o_.flavour == MpiFlavour::kMpich) return BuildHydraCommand(specs);
  const std::string& host0 = o_.hosts[0].netns;
  // mpirun in a UTS namespace named after host 0, so that it knows host 0 as its own.
  // clang-format off
  std::vector<std::string> c = {
      "/usr/bin/unshare", "--uts", "--mount", "--", "/bin/sh", "-c",
      std::string(kHostShell) + " && exec \"$@\"", host0, o_.mpirun,
      "--hostfile", dir_ + "/hostfile",
      "--bind-to", "none",
      "--mca", "plm", "rsh",
      "--mca", "plm_rsh_agent", dir_ + "/agent",
      "--mca", "plm_rsh_no_tree_spawn", "1",
      "--mca", "orte_tmpdir_base", dir_ + "/tmp",
      "--mca", "oob_tcp_if_include", o_.hosts[0].mgmt_dev,
      "--mca", "orte_abort_on_non_zero_status", "0",
      "--mca", "pml", o_.pml,
  };
  // clang-format on
  if (o_.pml == "ob1") {
    for (const char* a : {"--mca", "btl", "tcp,self,vader", "--mca", "btl_tcp_if_include"}) {
      c.emplace_back(a);
    }
    c.push_back(o_.data_interfaces);
  } else {
    // UCX on the rails only: no shared-memory transport, since UCX takes every process with
    // this machine's boot id for a neighbour, hosts or not (two ranks of one host meet over
    // TCP on the host's own addresses). Open MPI 4.1 selects pml ucx
    // only on the devices and transports of pml_ucx_devices/_tls, Mellanox ones by default:
    // without "any" it declines TCP and no PML is left.
    c.insert(c.end(), {"-x", "UCX_NET_DEVICES=" + o_.data_interfaces, "-x", "UCX_TLS=tcp,self",
                       "--mca", "pml_ucx_devices", "any", "--mca", "pml_ucx_tls", "any", "--mca",
                       "btl", "^tcp,openib,ofi"});
  }
  c.insert(c.end(), {"-x", "FAULTLINE_MPI_ERRORS=" + o_.errors});
  // `-host NAME` alone grants one slot on NAME: with two ranks of a host, the second app
  // context would find it "already filled". Each context names its host's whole slot count.
  std::vector<int> slots(o_.hosts.size(), 0);
  for (const LaunchSpec& s : specs) ++slots[s.placement.host];
  bool first = true;
  for (size_t i = 0; i < specs.size(); ++i) {
    const LaunchSpec& s = specs[i];
    if (!first) c.emplace_back(":");
    first = false;
    const int h = s.placement.host;
    c.insert(c.end(), {"-np", "1", "-host", o_.hosts[h].netns + ":" + std::to_string(slots[h])});
    for (const std::string& e : s.env) c.insert(c.end(), {"-x", e});
    c.insert(c.end(), {dir_ + "/rank", ranks_[i].status_file, StdoutPath(static_cast<int>(i)),
                       StderrPath(static_cast<int>(i))});
    c.insert(c.end(), s.argv.begin(), s.argv.end());
  }
  return c;
}

std::vector<std::string> MpiLauncher::BuildHydraCommand(
    const std::vector<LaunchSpec>& specs) const {
  const std::string& host0 = o_.hosts[0].netns;
  // mpiexec in a UTS namespace named after host 0: Hydra forks the proxy of the host whose
  // name is its own and starts the others through the agent. Through `ip netns exec` (into
  // the namespace it already is in) for host 0's own sysfs, as the agent does for the others.
  // clang-format off
  std::vector<std::string> c = {
      "/usr/bin/ip", "netns", "exec", host0,
      "/usr/bin/unshare", "--uts", "--", "/bin/sh", "-c",
      "echo \"$0\" >/proc/sys/kernel/hostname && exec \"$@\"", host0, o_.mpirun,
      "-f", dir_ + "/hostfile",
      "-launcher", "rsh", "-launcher-exec", dir_ + "/agent",
      "-iface", o_.hosts[0].mgmt_dev,
      "-disable-auto-cleanup",
      "-genv", "UCX_NET_DEVICES", o_.data_interfaces,
      "-genv", "UCX_TLS", "tcp,self",
      "-genv", "TMPDIR", dir_ + "/tmp",
      "-genv", "FAULTLINE_MPI_ERRORS", o_.errors,
  };
  // clang-format on
  for (size_t i = 0; i < specs.size(); ++i) {
    const LaunchSpec& s = specs[i];
    if (i > 0) c.emplace_back(":");
    c.insert(c.end(), {"-n", "1"});
    for (const std::string& e : s.env) {
      const size_t eq = e.find('=');
      c.insert(c.end(), {"-env", e.substr(0, eq), eq == std::string::npos ? "" : e.substr(eq + 1)});
    }
    c.insert(c.end(), {dir_ + "/rank", ranks_[i].status_file, StdoutPath(static_cast<int>(i)),
                       StderrPath(static_cast<int>(i))});
    c.insert(c.end(), s.argv.begin(), s.argv.end());
  }
  return c;
}

Result<std::vector<int>> MpiLauncher::StartWorld(const std::vector<LaunchSpec>& specs) {
  if (mpirun_ != nullptr) return InvalidArgument("mpi launcher: the world was started already");
  if (specs.empty()) return InvalidArgument("mpi launcher: no rank to start");
  for (size_t i = 0; i < specs.size(); ++i) {
    const LaunchSpec& s = specs[i];
    const std::string who = "rank " + std::to_string(s.placement.global_rank);
    if (s.body) return InvalidArgument(who + ": mpirun starts programs, not fork bodies");
    if (s.placement.global_rank != static_cast<int>(i)) {
      return InvalidArgument(who + ": mpirun numbers ranks in start order (spec " +
                             std::to_string(i) + ")");
    }
    if (s.placement.host < 0 || s.placement.host >= static_cast<int>(o_.hosts.size())) {
      return InvalidArgument(who + ": unknown host " + std::to_string(s.placement.host));
    }
    if (s.argv.empty()) return InvalidArgument(who + ": no program");
    // Hydra fills the hostfile's hosts in order: a host's ranks come together, in host order.
    if (o_.flavour == MpiFlavour::kMpich && i > 0 &&
        s.placement.host < specs[i - 1].placement.host) {
      return InvalidArgument(who + ": Hydra places ranks host by host; host " +
                             std::to_string(s.placement.host) + " comes after host " +
                             std::to_string(specs[i - 1].placement.host));
    }
    // mpirun splits its app contexts at a lone ':' and hands words on through a shell to the
    // remote daemons: every word must be plain.
    for (const std::string& a : s.argv) {
      if (a.empty() || a == ":" || a.find_first_of(" \t\n'\"\\$`") != std::string::npos) {
        return InvalidArgument(who + ": argument '" + a +
                               "' is empty, ':' or has a blank or a quote");
      }
    }
  }
  ranks_.clear();
  for (const LaunchSpec& s : specs) {
    Rank r;
    r.name = s.name.empty() ? "rank" + std::to_string(s.placement.global_rank) : s.name;
    r.status_file = dir_ + "/" + r.name + ".status";
    ranks_.push_back(std::move(r));
  }
  Status st = WriteFiles(specs);
  if (!st.ok()) {
    ranks_.clear();
    return st;
  }
  command_ = BuildCommand(specs);
  auto l = LocalNetnsLauncher::Create({o_.hosts[0].netns}, o_.log_dir);
  if (!l.ok()) {
    ranks_.clear();
    return l.status();
  }
  mpirun_ = std::move(l.value());
  LaunchSpec m;
  m.argv = command_;
  m.env = {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"};
  m.placement = {0, 0, 0};
  m.name = o_.flavour == MpiFlavour::kMpich ? "mpiexec" : "mpirun";
  auto h = mpirun_->Start(m);
  if (!h.ok()) {
    mpirun_.reset();
    Sweep();
    ranks_.clear();
    return Status(h.status().code(), m.name + ": " + h.status().message());
  }
  mpirun_handle_ = h.value();
  std::vector<int> handles;
  for (size_t i = 0; i < ranks_.size(); ++i) handles.push_back(static_cast<int>(i));
  return handles;
}

Status MpiLauncher::CheckHandle(int handle) const {
  if (handle < 0 || handle >= size()) {
    return InvalidArgument("mpi launcher: unknown rank handle " + std::to_string(handle));
  }
  return Status::Ok();
}

void MpiLauncher::Settle(bool killed_by_watchdog) {
  if (settled_) return;
  settled_ = true;
  for (Rank& r : ranks_) {
    std::ifstream f(r.status_file);
    int code = -1;
    if (f >> code && code >= 0) {
      if (code > 128) {  // the shell's 128 + signal
        r.status.state = ExitStatus::State::kSignaled;
        r.status.signal = code - 128;
      } else {
        r.status.state = ExitStatus::State::kExited;
        r.status.code = code;
      }
    } else {
      // No status: the rank (or its wrapper) was killed when the job ended.
      r.status.state = ExitStatus::State::kSignaled;
      r.status.signal = SIGKILL;
      r.status.killed_by_watchdog = killed_by_watchdog;
    }
  }
  swept_ += Sweep();
}

Result<ExitStatus> MpiLauncher::Wait(int handle, int64_t deadline_ns) {
  FL_RETURN_IF_ERROR(CheckHandle(handle));
  if (!settled_) {
    auto st = mpirun_->Wait(mpirun_handle_, deadline_ns);
    if (!st.ok()) return st.status();
    if (st->running()) return ExitStatus{};
    Settle(false);
  }
  return ranks_[handle].status;
}

Status MpiLauncher::Kill(int handle, int sig) {
  FL_RETURN_IF_ERROR(CheckHandle(handle));
  if (settled_) return Status::Ok();
  return mpirun_->Kill(mpirun_handle_, sig);
}

WaitAllReport MpiLauncher::WaitAll(int64_t deadline_ns) {
  WaitAllReport r;
  if (mpirun_ != nullptr && !settled_) {
    // mpirun first ends the job itself (SIGTERM: it tells every orted to kill its ranks);
    // what is left after two seconds is killed.
    auto st = mpirun_->Wait(mpirun_handle_, deadline_ns);
    const bool hung = st.ok() && st->running();
    if (hung) {
      (void)mpirun_->Kill(mpirun_handle_, SIGTERM);
      auto gone = mpirun_->Wait(mpirun_handle_, MonoNow() + 2'000'000'000LL);
      if (!gone.ok() || gone->running()) (void)mpirun_->WaitAll(MonoNow());
    }
    Settle(hung);
    if (hung) {
      for (int i = 0; i < size(); ++i) {
        ExitStatus& s = ranks_[i].status;
        if (s.state == ExitStatus::State::kSignaled) s.killed_by_watchdog = true;
        r.killed.push_back(i);
      }
    }
  }
  for (const Rank& k : ranks_) r.statuses.push_back(k.status);
  return r;
}

std::optional<pid_t> MpiLauncher::LocalPid(int handle) const {
  if (handle < 0 || handle >= size() || settled_) {
    return std::nullopt;
  }
  std::ifstream f(ranks_[handle].status_file + ".pid");
  long pid = 0;
  if (!(f >> pid) || pid <= 0) return std::nullopt;
  return static_cast<pid_t>(pid);
}

ExitStatus MpiLauncher::status(int handle) const {
  if (handle < 0 || handle >= size()) return ExitStatus{};
  return ranks_[handle].status;
}

std::string MpiLauncher::StdoutPath(int handle) const {
  if (handle < 0 || handle >= size() || o_.log_dir.empty()) return "";
  return o_.log_dir + "/" + ranks_[handle].name + ".out";
}

std::string MpiLauncher::StderrPath(int handle) const {
  if (handle < 0 || handle >= size() || o_.log_dir.empty()) return "";
  return o_.log_dir + "/" + ranks_[handle].name + ".err";
}

int MpiLauncher::Sweep() noexcept {
  std::set<std::pair<dev_t, ino_t>> spaces;
  for (const MpiHost& h : o_.hosts) {
    struct stat st {};
    if (::stat(("/run/netns/" + h.netns).c_str(), &st) == 0) spaces.insert({st.st_dev, st.st_ino});
  }
  if (spaces.empty()) return 0;
  const pid_t self = ::getpid();
  std::set<pid_t> killed;
  const int64_t until = MonoNow() + 2'000'000'000LL;
  for (;;) {
    bool left = false;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/proc", ec)) {
      const std::string name = e.path().filename().string();
      if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
      const pid_t pid = static_cast<pid_t>(std::stol(name));
      if (pid == self) continue;
      struct stat st {};
      if (::stat(("/proc/" + name + "/ns/net").c_str(), &st) != 0) continue;
      if (!spaces.count({st.st_dev, st.st_ino})) continue;
      // A zombie waits for its parent (init, once orphaned); it holds no namespace.
      std::ifstream statf("/proc/" + name + "/stat");
      std::string line;
      std::getline(statf, line);
      const size_t paren = line.rfind(')');
      if (paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z') continue;
      left = true;
      if (::kill(pid, SIGKILL) == 0) killed.insert(pid);
    }
    if (!left || MonoNow() >= until) break;
    ::usleep(20000);
  }
  return static_cast<int>(killed.size());
}

}  // namespace faultline::runner
