// The exit codes of every `faultline` command (DESIGN.md, "Exit codes"): 0 success; 1 an
// expectation failed (run) or a regression (compare, trend); 2 bad input or a refusal, nothing
// was changed; 3 the harness or the kernel failed (and said why). Over several runs the worst
// one wins, in the order 3 > 2 > 1 > 0. Pure; constexpr.
#pragma once

namespace faultline::reports {

enum class ExitCode : int {
  kOk = 0,
  kExpectationFailed = 1,
  kBadInput = 2,
  kHarnessError = 3,
};

// The process exit status of `code`.
constexpr int ToInt(ExitCode code) { return static_cast<int>(code); }

// An exit status read back as a code: 0..3 are themselves, anything else (a signal, a crash)
// is the harness's failure.
constexpr ExitCode ExitCodeFromInt(int status) {
  switch (status) {
    case 0:
      return ExitCode::kOk;
    case 1:
      return ExitCode::kExpectationFailed;
    case 2:
      return ExitCode::kBadInput;
    default:
      return ExitCode::kHarnessError;
  }
}

// The worse of two codes: kHarnessError > kBadInput > kExpectationFailed > kOk.
constexpr ExitCode Worse(ExitCode a, ExitCode b) { return ToInt(b) > ToInt(a) ? b : a; }

}  // namespace faultline::reports
