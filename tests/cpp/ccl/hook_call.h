// A raw client of the fault-hook protocol for tests: sends bytes exactly as given, so that
// tests can also send what a well-behaved client never would (no newline, overlong lines).
#pragma once

#include <chrono>
#include <string>

namespace ftccl::test {

// Connects to the Unix socket `path`, sends `bytes`, and reads until a '\n', EOF or `timeout`.
// Returns the response line without its '\n'; "" when nothing came back; "<connect failed: ..>"
// when nobody listens.
std::string HookExchange(const std::string& path, const std::string& bytes,
                         std::chrono::milliseconds timeout = std::chrono::milliseconds(8000));

}  // namespace ftccl::test
