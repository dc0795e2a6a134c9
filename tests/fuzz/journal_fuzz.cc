// One undo-journal entry file as `faultline cleanup` reads it (ParseJournalEntry).
// Properties: no exception or crash; an entry that parses has a kind and an object undo.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "injector/journal.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto e = faultline::ParseJournalEntry(text, "00000000000000000001-0000001-000000", "/j/e.json");
  if (!e.ok()) {
    FUZZ_CHECK(e.status().message().find("/j/e.json") != std::string::npos, "%s",
               e.status().ToString().c_str());
    return 0;
  }
  FUZZ_CHECK(e->undo.is_object(), "undo is %s", e->undo.type_name());
  FUZZ_CHECK(e->pid >= 0, "pid %d", e->pid);
  (void)e->undo.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return 0;
}
