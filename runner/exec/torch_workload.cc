#include "runner/exec/torch_workload.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace faultline::runner {

std::string TorchPython() {
  if (const char* p = std::getenv("FAULTLINE_PYTHON"); p != nullptr && *p != '\0') return p;
  if (access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";
  return "python3";
}

std::string TorchPackageDir(const std::string& bin_dir) { return bin_dir + "/../python"; }

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

std::optional<std::string> ProbeTorch(const std::string& bin_dir, std::string_view ccl) {
  // Each check prints one line naming what is missing; silence means it can run.
  std::string code =
      "import sys\n"
      "try:\n"
      "    import torch, torch.distributed as d\n"
      "except Exception as e:\n"
      "    print('PyTorch is not installed for ' + sys.executable + ' (apt install "
      "python3-torch): ' + str(e)); sys.exit(0)\n"
      "if not d.is_available(): print('this PyTorch has no torch.distributed'); sys.exit(0)\n";
  if (ccl == "ftccl") {
    code +=
        "try:\n"
        "    import ftccl_torch\n"
        "except Exception as e:\n"
        "    print('the ftccl PyTorch backend is not built (integrations/torch needs "
        "libtorch-dev and pybind11-dev): ' + str(e))\n";
  } else if (ccl == "gloo") {
    code += "if not d.is_gloo_available(): print('this PyTorch has no Gloo backend')\n";
  } else if (ccl == "nccl") {
    code +=
        "if not (d.is_nccl_available() and torch.cuda.is_available()):\n"
        "    print('torch_ddp over nccl needs a CUDA build of PyTorch and a GPU; this one has "
        "' + ('no GPU' if d.is_nccl_available() else 'no NCCL (a CPU build)'))\n";
  }
  const std::string cmd = "PYTHONPATH='" + TorchPackageDir(bin_dir) + "' '" + TorchPython() +
                          "' -c \"$FAULTLINE_TORCH_PROBE\" 2>&1";
  setenv("FAULTLINE_TORCH_PROBE", code.c_str(), 1);
  FILE* p = ::popen(cmd.c_str(), "r");
  unsetenv("FAULTLINE_TORCH_PROBE");
  if (p == nullptr) return "cannot run " + TorchPython();
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int rc = ::pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  if (!out.empty()) return out;
  if (rc != 0) return "cannot run " + TorchPython() + " (exit " + std::to_string(rc) + ")";
  return std::nullopt;
}

}  // namespace faultline::runner
