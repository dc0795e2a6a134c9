#include "runner/exec/torch_workload.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <cstdlib>
#include <filesystem>

extern char** environ;

namespace faultline::runner {

std::string TorchPython() {
  if (const char* p = std::getenv("FAULTLINE_PYTHON"); p != nullptr && *p != '\0') return p;
  if (access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";
  return "python3";
}

std::string TorchPackageDir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "python";
  return (exe.parent_path().parent_path() / "python").lexically_normal().string();
}

std::string TorchPythonPath() {
  std::string path = TorchPackageDir();
  if (const char* own = std::getenv("PYTHONPATH"); own != nullptr && *own != '\0') {
    path += std::string(":") + own;
  }
  return path;
}

std::vector<std::string> TorchScriptArgv(const Workload& w) {
  if (w.script.empty()) return {TorchPython(), "-m", "faultline_torch.ddp_train"};
  return {TorchPython(), w.script};
}

std::vector<std::string> TorchScriptOptions(const Workload& w) {
  std::vector<std::string> out;
  for (const auto& [key, value] : w.script_args) {
    out.push_back("--" + key);
    out.push_back(value);
  }
  return out;
}

std::optional<std::string> ProbeTorch(std::string_view ccl) {
  // Each check prints one "MISSING: why" line; anything else on the output (a warning while
  // importing torch) is not a verdict.
  std::string code =
      "import sys\n"
      "def missing(why): print('MISSING: ' + why); sys.exit(0)\n"
      "try:\n"
      "    import torch, torch.distributed as d\n"
      "except Exception as e:\n"
      "    missing('PyTorch is not installed for ' + sys.executable + ' (apt install "
      "python3-torch): ' + str(e))\n"
      "if not d.is_available(): missing('this PyTorch has no torch.distributed')\n";
  if (ccl == "ftccl") {
    code +=
        "try:\n"
        "    import ftccl_torch\n"
        "except Exception as e:\n"
        "    missing('the ftccl PyTorch backend is not built (integrations/torch needs "
        "libtorch-dev and pybind11-dev): ' + str(e))\n";
  } else if (ccl == "gloo") {
    code += "if not d.is_gloo_available(): missing('this PyTorch has no Gloo backend')\n";
  } else if (ccl == "nccl") {
    code +=
        "if not (d.is_nccl_available() and torch.cuda.is_available()):\n"
        "    missing('torch_ddp over nccl needs a CUDA build of PyTorch and a GPU; this one has ' "
        "+ ('no GPU' if d.is_nccl_available() else 'no NCCL (a CPU build)'))\n";
  }
  code += "print('OK')\n";
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return std::string("cannot probe PyTorch: pipe failed");
  const std::string python = TorchPython();
  // argv and environment built before fork: the child only dup2()s and execs.
  std::vector<std::string> env_strings = {"PYTHONPATH=" + TorchPythonPath()};
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "PYTHONPATH=", 11) != 0) env_strings.emplace_back(*e);
  }
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string arg_c = "-c";
  std::vector<char*> argv = {const_cast<char*>(python.c_str()), arg_c.data(), code.data(),
                             nullptr};
  const int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  const pid_t pid = fork();
  if (pid < 0) {
    close(pipefd[0]);
    close(pipefd[1]);
    if (devnull >= 0) close(devnull);
    return std::string("cannot probe PyTorch: fork failed");
  }
  if (pid == 0) {
    dup2(pipefd[1], STDOUT_FILENO);
    if (devnull >= 0) dup2(devnull, STDERR_FILENO);
    execvpe(python.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  if (devnull >= 0) close(devnull);
  close(pipefd[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(pipefd[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) out.append(buf, static_cast<size_t>(n));
  }
  close(pipefd[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (const size_t at = out.find("MISSING: "); at != std::string::npos) {
    std::string why = out.substr(at + 9);
    why = why.substr(0, why.find('\n'));
    return why;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && out.find("OK") != std::string::npos) {
    return std::nullopt;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) return "cannot run " + python;
  return "cannot tell whether PyTorch can run: " + python + " " +
         (WIFEXITED(status) ? "exited " + std::to_string(WEXITSTATUS(status))
                            : "was killed by signal " + std::to_string(WTERMSIG(status)));
}

}  // namespace faultline::runner
