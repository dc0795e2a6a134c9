#include "runner/exec/slurm_launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "base/clock.h"
#include "base/log.h"
#include "runner/exec/slurm_cluster.h"

namespace faultline::runner {
namespace fs = std::filesystem;
namespace {

constexpr int64_t kPollNs = 5'000'000;

std::string TaskFile(const std::string& dir, int t, const char* ext) {
  return dir + "/task" + std::to_string(t) + ext;
}

std::optional<nlohmann::json> ReadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

Status WriteJsonAtomic(const std::string& path, const nlohmann::json& j) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump() << "\n";
    out.flush();
    if (!out) return Status(Code::kInternal, "cannot write " + tmp);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Status(Code::kInternal, "cannot write " + path + ": " + ec.message());
  return Status::Ok();
}

// srun's words for a signal (strsignal of the node's libc).
int SignalFromWords(const std::string& w) {
  for (int s = 1; s < NSIG; ++s) {
    const char* name = ::strsignal(s);
    if (name != nullptr && w == name) return s;
  }
  return 0;
}

}  // namespace

Result<std::unique_ptr<SlurmLauncher>> SlurmLauncher::Create(SlurmLauncherOptions o) {
  if (o.log_dir.empty()) return InvalidArgument("the Slurm launcher needs a log directory");
  if (o.task_exe.empty() || ::access(o.task_exe.c_str(), X_OK) != 0)
    return NotFound("task program '" + o.task_exe + "' is not executable");
  o.log_dir = fs::absolute(o.log_dir).lexically_normal().string();
  std::unique_ptr<SlurmLauncher> l(new SlurmLauncher(std::move(o)));
  std::error_code ec;
  fs::create_directories(l->TaskDir(), ec);
  if (ec) return InvalidArgument("cannot create " + l->TaskDir() + ": " + ec.message());
  auto srun = LocalNetnsLauncher::Create({l->o_.netns}, l->o_.log_dir);
  if (!srun.ok()) return srun.status();
  l->srun_ = std::move(srun).value();
  return l;
}

SlurmLauncher::~SlurmLauncher() {
  bool running = false;
  for (int t = 0; t < size(); ++t) running |= !Poll(t);
  if (running && !SrunExited()) ScancelStep(SIGKILL).IgnoreError();
  // srun_'s destructor SIGKILLs and reaps srun if it is still there.
}

Result<std::vector<int>> SlurmLauncher::StartWorld(const std::vector<LaunchSpec>& specs) {
  if (srun_handle_ >= 0) return Unavailable("the Slurm launcher starts one world per run");
  if (specs.empty()) return InvalidArgument("no ranks to start");
  int hosts = 0;
  for (const auto& s : specs) hosts = std::max(hosts, s.placement.host + 1);
  const int world = static_cast<int>(specs.size());
  if (world % hosts != 0) {
    return InvalidArgument("Slurm places the same number of ranks on every host (" +
                           std::to_string(world) + " ranks over " + std::to_string(hosts) +
                           " hosts)");
  }
  const int per_host = world / hosts;
  for (int g = 0; g < world; ++g) {
    const LaunchSpec& s = specs[g];
    if (s.body) return InvalidArgument("rank " + std::to_string(g) + ": Slurm runs programs, not fork bodies");
    if (s.argv.empty()) return InvalidArgument("rank " + std::to_string(g) + ": empty argv");
    if (s.placement.global_rank != g || s.placement.host != g / per_host ||
        s.placement.local_rank != g % per_host) {
      return InvalidArgument("rank " + std::to_string(g) +
                             ": Slurm's block distribution places global rank g on host g / " +
                             std::to_string(per_host) + " as local rank g % " +
                             std::to_string(per_host));
    }
  }
  if (!o_.nodes.empty() && static_cast<int>(o_.nodes.size()) < hosts) {
    return InvalidArgument(std::to_string(hosts) + " hosts wanted, the cluster has " +
                           std::to_string(o_.nodes.size()));
  }
  std::error_code ec;
  for (int g = 0; g < world; ++g) {
    const LaunchSpec& s = specs[g];
    const std::string name = s.name.empty() ? "rank" + std::to_string(g) : s.name;
    for (const char* ext : {".status", ".started"}) fs::remove(TaskFile(TaskDir(), g, ext), ec);
    nlohmann::json j = {{"argv", s.argv},
                        {"env", s.env},
                        {"host", s.placement.host},
                        {"local_rank", s.placement.local_rank},
                        {"global_rank", g},
                        {"stdout", o_.log_dir + "/" + name + ".out"},
                        {"stderr", o_.log_dir + "/" + name + ".err"}};
    FL_RETURN_IF_ERROR(WriteJsonAtomic(TaskFile(TaskDir(), g, ".json"), j));
    tasks_.push_back({name, ExitStatus{}});
  }
  std::vector<std::string> argv = {
      "srun", "--job-name=" + o_.job_name, "--nodes=" + std::to_string(hosts),
      "--ntasks=" + std::to_string(world), "--ntasks-per-node=" + std::to_string(per_host),
      "--distribution=block", "--kill-on-bad-exit=0", "--input=none",
      // A failed node does not end the step: the other ranks live on and the CCL decides
      // their fate, as it does when a host's ranks die under the local launcher.
      "--no-kill", "--output=/dev/null", "--error=" + TaskDir() + "/task%t.err"};
  if (!o_.nodes.empty()) {
    std::string list;
    for (int h = 0; h < hosts; ++h) list += (h ? "," : "") + o_.nodes[h];
    argv.push_back("--nodelist=" + list);
  }
  if (!o_.partition.empty()) argv.push_back("--partition=" + o_.partition);
  argv.insert(argv.end(), {"--", o_.task_exe, "task-exec", "--dir", TaskDir()});
  LaunchSpec srun;
  srun.argv = std::move(argv);
  srun.env = o_.client_env;
  srun.name = "srun";
  auto h = srun_->Start(srun);
  if (!h.ok()) {
    tasks_.clear();
    return h.status().WithContext("starting srun");
  }
  srun_handle_ = *h;
  std::vector<int> handles;
  for (int g = 0; g < world; ++g) handles.push_back(g);
  return handles;
}

bool SlurmLauncher::SrunExited() {
  if (srun_handle_ < 0) return true;
  auto st = srun_->Wait(srun_handle_, MonoNow());
  return st.ok() && !st->running();
}

bool SlurmLauncher::Poll(int t) {
  Task& task = tasks_[t];
  if (!task.status.running()) return true;
  auto j = ReadJson(TaskFile(TaskDir(), t, ".status"));
  if (!j) return false;
  const std::string state = j->value("state", "");
  if (state == "signaled") {
    task.status.state = ExitStatus::State::kSignaled;
    task.status.signal = j->value("signal", 0);
  } else {
    task.status.state = ExitStatus::State::kExited;
    task.status.code = j->value("code", 255);
  }
  return true;
}

void SlurmLauncher::ReadSrunVerdicts() {
  // A task that could not write its status (killed with its step) is described by srun:
  // "srun: error: h0: task 1: Exited with exit code 3", "... task 2: Killed".
  static const std::regex line(R"(task (\d+): (.*)$)");
  std::ifstream in(o_.log_dir + "/srun.err");
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (!std::regex_search(l, m, line)) continue;
    const int t = std::stoi(m[1]);
    if (t < 0 || t >= size() || !tasks_[t].status.running()) continue;
    const std::string what = m[2];
    ExitStatus& es = tasks_[t].status;
    if (what.rfind("Exited with exit code ", 0) == 0) {
      es.state = ExitStatus::State::kExited;
      es.code = std::atoi(what.c_str() + 22);
    } else if (int sig = SignalFromWords(what); sig != 0) {
      es.state = ExitStatus::State::kSignaled;
      es.signal = sig;
    }
  }
}

Result<ExitStatus> SlurmLauncher::Wait(int handle, int64_t deadline_ns) {
  if (handle < 0 || handle >= size()) return InvalidArgument("unknown rank handle");
  for (;;) {
    if (Poll(handle)) return tasks_[handle].status;
    if (SrunExited()) {
      // The step is over: what the task did not write, srun says; a task that neither wrote
      // nor was named never ran to its end (its node failed, the step was cancelled).
      if (Poll(handle)) return tasks_[handle].status;
      ReadSrunVerdicts();
      ExitStatus& es = tasks_[handle].status;
      if (es.running()) {
        es.state = ExitStatus::State::kSignaled;
        es.signal = SIGKILL;
      }
      return es;
    }
    if (MonoNow() >= deadline_ns) return tasks_[handle].status;
    ::usleep(kPollNs / 1000);
  }
}

Status SlurmLauncher::Kill(int handle, int sig) {
  if (handle < 0 || handle >= size()) return InvalidArgument("unknown rank handle");
  if (Poll(handle)) return Status::Ok();
  return Status(Code::kUnavailable,
                "rank " + std::to_string(handle) + " runs in a Slurm job step: a single rank is "
                "signalled through its host's agent (signal " + std::to_string(sig) + " not sent)");
}

std::optional<SlurmStep> SlurmLauncher::step() const {
  for (int t = 0; t < static_cast<int>(tasks_.size()); ++t) {
    if (auto j = ReadJson(TaskFile(TaskDir(), t, ".started"))) {
      return SlurmStep{j->value("job_id", ""), j->value("step_id", "")};
    }
  }
  return std::nullopt;
}

std::optional<int64_t> SlurmLauncher::AllStartedNs() const {
  int64_t last = 0;
  for (int t = 0; t < static_cast<int>(tasks_.size()); ++t) {
    auto j = ReadJson(TaskFile(TaskDir(), t, ".started"));
    if (!j) return std::nullopt;
    last = std::max<int64_t>(last, j->value("mono_ns", int64_t{0}));
  }
  return last;
}

Status SlurmLauncher::ScancelStep(int sig) {
  auto s = step();
  std::vector<std::string> argv = {"scancel", "--signal=" + std::to_string(sig)};
  if (s && !s->job_id.empty()) {
    argv.push_back(s->job_id + "." + s->step_id);
  } else {
    // No task has started yet: the step's job by name, which srun created for this run.
    argv.push_back("--name=" + o_.job_name);
  }
  auto r = RunCommandIn(o_.netns, argv, o_.client_env, 10'000'000'000);
  return r.ok() ? Status::Ok() : r.status();
}

WaitAllReport SlurmLauncher::WaitAll(int64_t deadline_ns) {
  WaitAllReport r;
  for (;;) {
    bool all = true;
    for (int t = 0; t < size(); ++t) all &= Poll(t);
    if (all || SrunExited() || MonoNow() >= deadline_ns) break;
    ::usleep(kPollNs / 1000);
  }
  std::vector<int> running;
  for (int t = 0; t < size(); ++t) {
    if (!Poll(t)) running.push_back(t);
  }
  if (!running.empty() && !SrunExited()) {
    Status st = ScancelStep(SIGKILL);
    if (!st.ok()) std::fprintf(stderr, "faultline: scancel: %s\n", st.ToString().c_str());
    // srun ends once slurmd reports the step's tasks gone.
    auto ended = srun_->Wait(srun_handle_, MonoNow() + 15'000'000'000);
    if (!ended.ok() || ended->running()) srun_->Kill(srun_handle_, SIGKILL).IgnoreError();
    (void)srun_->Wait(srun_handle_, MonoNow() + 5'000'000'000);
    for (int t : running) {
      if (!Poll(t)) {
        ExitStatus& es = tasks_[t].status;
        es.state = ExitStatus::State::kSignaled;
        es.signal = SIGKILL;
      }
      tasks_[t].status.killed_by_watchdog = true;
      r.killed.push_back(t);
    }
  } else if (!running.empty()) {
    for (int t : running) (void)Wait(t, MonoNow());
  }
  for (int t = 0; t < size(); ++t) r.statuses.push_back(tasks_[t].status);
  return r;
}

ExitStatus SlurmLauncher::status(int handle) const {
  if (handle < 0 || handle >= size()) return ExitStatus{};
  return tasks_[handle].status;
}

std::string SlurmLauncher::StdoutPath(int handle) const {
  return o_.log_dir + "/" + tasks_.at(handle).name + ".out";
}
std::string SlurmLauncher::StderrPath(int handle) const {
  return o_.log_dir + "/" + tasks_.at(handle).name + ".err";
}

// ---- the task side ----
namespace {
pid_t g_child = -1;
void Forward(int sig) {
  if (g_child > 0) ::kill(g_child, sig);
}
int EnvInt(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return -1;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  return *end == '\0' ? static_cast<int>(x) : -1;
}
std::string EnvStr(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}
}  // namespace

int RunSlurmTask(const std::string& dir) {
  const int procid = EnvInt("SLURM_PROCID"), localid = EnvInt("SLURM_LOCALID"),
            nodeid = EnvInt("SLURM_NODEID");
  if (procid < 0 || localid < 0 || nodeid < 0) {
    FL_ERROR("task-exec",
             "not a Slurm task (SLURM_PROCID, SLURM_LOCALID "
             "and SLURM_NODEID must be set)");
    return 2;
  }
  const std::string status_path = TaskFile(dir, procid, ".status");
  auto fail = [&](const std::string& why) {
    FL_ERROR("task-exec", "task %d: %s", procid, why.c_str());
    WriteJsonAtomic(status_path, {{"state", "exited"}, {"code", 125}, {"error", why}})
        .IgnoreError();
    return 125;
  };
  auto spec = ReadJson(TaskFile(dir, procid, ".json"));
  if (!spec) return fail("no readable spec " + TaskFile(dir, procid, ".json"));
  std::vector<std::string> argv, env;
  std::string out, err;
  int host = -1, local = -1;
  try {
    argv = spec->at("argv").get<std::vector<std::string>>();
    env = spec->at("env").get<std::vector<std::string>>();
    out = spec->at("stdout").get<std::string>();
    err = spec->at("stderr").get<std::string>();
    host = spec->at("host").get<int>();
    local = spec->at("local_rank").get<int>();
  } catch (const nlohmann::json::exception& e) {
    return fail(std::string("malformed spec: ") + e.what());
  }
  if (argv.empty()) return fail("empty argv");
  if (host != nodeid || local != localid) {
    return fail("placed on node " + std::to_string(nodeid) + " as local task " +
                std::to_string(localid) + ", but the rank belongs to host " +
                std::to_string(host) + " as local rank " + std::to_string(local));
  }
  WriteJsonAtomic(TaskFile(dir, procid, ".started"),
                  {{"pid", ::getpid()},
                   {"node", EnvStr("SLURMD_NODENAME")},
                   {"job_id", EnvStr("SLURM_JOB_ID")},
                   {"step_id", EnvStr("SLURM_STEP_ID")},
                   {"mono_ns", MonoNow()}})
      .IgnoreError();
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCONT}) {
    struct sigaction sa {};
    sa.sa_handler = Forward;
    sigemptyset(&sa.sa_mask);
    ::sigaction(s, &sa, nullptr);
  }
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return fail(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(125);
    for (int s = 1; s < NSIG; ++s) ::signal(s, SIG_DFL);
    for (auto& e : env) ::putenv(e.data());
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (o < 0 || e < 0) ::_exit(126);
    ::dup2(o, 1);
    ::dup2(e, 2);
    ::execvp(args[0], args.data());
    FL_ERROR("task-exec", "exec %s: %s", args[0], std::strerror(errno));
    ::_exit(127);
  }
  g_child = pid;
  int ws = 0;
  while (::waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(ws)) {
    WriteJsonAtomic(status_path, {{"state", "signaled"}, {"signal", WTERMSIG(ws)}}).IgnoreError();
    ::signal(WTERMSIG(ws), SIG_DFL);
    ::raise(WTERMSIG(ws));
    return 128 + WTERMSIG(ws);
  }
  WriteJsonAtomic(status_path, {{"state", "exited"}, {"code", WEXITSTATUS(ws)}}).IgnoreError();
  return WEXITSTATUS(ws);
}

}  // namespace faultline::runner
