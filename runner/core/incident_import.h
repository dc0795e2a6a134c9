// A production incident's logs turned into a scenario (`faultline import`): the parsed link
// events (runner/core/link_log.h) placed on the rails of a test topology.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "runner/core/link_log.h"
#include "runner/core/scenario.h"

namespace faultline::runner {

// Where a logged device lands in the topology.
struct RailRef {
  int host = 0;
  int rail = 0;
  LinkSide side = LinkSide::kHost;
};

// "eth2=host0/rail1", "node17:eth2=host1/rail0/switch", "0000:08:00.0=host0/rail0": the
// device (optionally "NODE:" first, the host name of syslog/journal lines) and its rail.
Result<std::pair<std::string, RailRef>> ParseRailMapping(std::string_view flag);

struct ImportOptions {
  std::map<std::string, RailRef> map;  // device key -> rail (ParseRailMapping)
  int64_t at_ns = 2'000'000'000;       // the first event's time in the scenario
  int64_t tail_ns = 3'000'000'000;     // run time after the last event (rounded up to 1 s)
  std::string name = "imported-link-events";
  std::optional<int> hosts;  // default: the highest mapped host + 1, at least 2
  std::optional<int> rails;  // default: the highest mapped rail + 1, at least 2
  int ranks_per_host = 1;
  std::string op = "allreduce";
  std::string bytes = "16MiB";
};

struct ImportResult {
  std::string yaml;                   // a scenario that validates
  std::vector<LinkEvent> used;        // the events that became faults, in time order
  std::vector<std::string> unmapped;  // devices with events but no mapping
  int faults = 0;
  int permanent = 0;  // downs without a matching up
};

// Turns the events of every log into a scenario: per mapped device, each down followed by an
// up becomes a link_down with `for` (the time between them, at least 1 ms); a down without an
// up holds until the end of the run; repeated downs or ups without a change are ignored.
// Errors (kInvalidArgument): no mapped event, events without a common clock, or a result
// that does not validate (e.g. two devices mapped to one rail overlap), with the reason.
Result<ImportResult> ImportLinkEvents(const std::vector<LinkEvent>& events,
                                      const ImportOptions& options);

}  // namespace faultline::runner
