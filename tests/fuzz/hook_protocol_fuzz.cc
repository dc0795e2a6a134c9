// The fault-hook server's request handling (ccl/src/fault_hook_request.h): a client's bytes
// through the framing, then the request answered against a fake FaultTarget. Properties: no
// exception or crash; every answer is one JSON object line with "v" and a boolean "ok", and
// a failure carries an "error" that is not an exception caught inside ("internal error").
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "fault_hook_request.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

// Answers every op, as a transport that can do them all.
class FakeTarget final : public ftccl::transport::FaultTarget {
 public:
  const char* TransportName() const override { return "tcp"; }
  ftccl::Result<ftccl::transport::PathFaultState> QueryPath(int peer, int rail,
                                                            Deadline) override {
    ftccl::transport::PathFaultState s;
    s.corrupt_frames_sent = static_cast<uint64_t>(peer + rail);
    return s;
  }
  ftccl::Result<ftccl::transport::PathFaultState> CorruptNextFrame(int peer, int rail,
                                                                   ftccl::transport::FramePart,
                                                                   Deadline) override {
    ftccl::transport::PathFaultState s;
    s.corrupt_frames_sent = 1;
    s.applied_ns = 1;
    return s;
  }
  ftccl::Result<ftccl::transport::PathFaultState> InjectQpError(int, int, Deadline) override {
    return ftccl::transport::Unsupported();
  }
};

void CheckAnswer(const std::string& answer) {
  FUZZ_CHECK(answer.find('\n') == std::string::npos, "newline in %s", answer.c_str());
  const auto j = nlohmann::json::parse(answer, nullptr, /*allow_exceptions=*/false);
  FUZZ_CHECK(j.is_object() && j.contains("v") && j.contains("ok") && j["ok"].is_boolean(),
             "%s", answer.c_str());
  if (!j["ok"].get<bool>()) {
    FUZZ_CHECK(j.contains("error") && j["error"].is_string(), "%s", answer.c_str());
    FUZZ_CHECK(j["error"].get<std::string>().rfind("internal error", 0) != 0, "%s",
               answer.c_str());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static FakeTarget target;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const ftccl::HookInput in = ftccl::TakeHookRequestLine(bytes);
  if (in.kind == ftccl::HookInput::kTooLong) {
    FUZZ_CHECK(size >= ftccl::kHookMaxLine, "too long at %zu bytes", size);
    CheckAnswer(ftccl::HookFailureLine("request line longer than 4096 bytes"));
    return 0;
  }
  // A client that sent no '\n' yet: the request as if it had, as the fuzzer's inputs rarely
  // end in one.
  const std::string line = in.kind == ftccl::HookInput::kLine ? in.line : std::string(bytes);
  if (line.size() >= ftccl::kHookMaxLine) return 0;
  FUZZ_CHECK(line.find('\n') == std::string::npos, "framing kept a newline");
  CheckAnswer(ftccl::AnswerHookRequest(line, {&target, /*rank=*/1, /*size=*/4, /*num_rails=*/2}));
  return 0;
}
