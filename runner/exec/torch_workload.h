// How the runner starts the ranks of a torch_ddp workload (scenario.h WorkloadKind): each rank
// is a Python process running the training script, with the packages of integrations/torch
// (built into <build>/python) on its PYTHONPATH. The rank side is faultline_torch
// (integrations/torch/python/faultline_torch), which writes the worker log the runner reads.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runner/core/scenario.h"

namespace faultline::runner {

// The interpreter: $FAULTLINE_PYTHON, else /usr/bin/python3 (where Debian's python3-torch
// is), else python3 from $PATH.
std::string TorchPython();

// <directory of this executable>/../python, absolute: ftccl_torch (the backend) and
// faultline_torch (the rank side), as the build puts them.
std::string TorchPackageDir();

// The rank's PYTHONPATH: TorchPackageDir(), then the caller's own PYTHONPATH if any.
std::string TorchPythonPath();

// The launch of one rank up to the rank's own options: the interpreter, then the script, or
// `-m faultline_torch.ddp_train` for the reference script.
std::vector<std::string> TorchScriptArgv(const Workload& w);

// The script's own options (workload.args) as --key value, appended after the runner's.
std::vector<std::string> TorchScriptOptions(const Workload& w);

// nullopt when this machine can run a torch_ddp rank over `ccl`: the interpreter imports torch
// with torch.distributed, and ftccl_torch for ftccl, or finds a GPU for nccl; else why not,
// e.g. "PyTorch is not installed (apt install python3-torch)". Runs the interpreter (fork and
// exec, no shell).
std::optional<std::string> ProbeTorch(std::string_view ccl);

}  // namespace faultline::runner
