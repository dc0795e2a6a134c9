// `faultline validate FILE...` (cmd_validate.cc).
#pragma once

#include "runner/cli/command.h"

namespace faultline::cli {

void RegisterValidate(CLI::App& app, Action* action);

}  // namespace faultline::cli
