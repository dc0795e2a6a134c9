// The transport factory: sets up the connections of a communicator on the backend its options
// name (CommOptions::transport: "tcp" or "verbs") and hands them to the chunk engine.
//
// Two phases, because the listeners' ports travel in the bootstrap table: OpenListeners before
// bootstrap, Connect once every rank's table is known. Both backends start from the same TCP
// mesh (tcp/setup.h); verbs then moves every connection onto an RC queue pair over it
// (verbs/setup.h) and closes the sockets.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "bootstrap.h"
#include "net.h"
#include "transport/engine/engine.h"

namespace ftccl::transport {

// One listener per rail on this rank's rail addresses (network byte order).
Result<std::vector<std::pair<net::Fd, net::Endpoint>>> OpenListeners(
    const std::vector<uint32_t>& rail_ips);

// Establishes every connection of the mesh on the chosen backend before `deadline`. Does not
// start the engine's progress thread (Engine::Start).
Result<std::unique_ptr<engine::Engine>> Connect(
    const CommOptions& options, const BootstrapTable& table,
    std::vector<std::pair<net::Fd, net::Endpoint>> listeners,
    const std::vector<uint32_t>& rail_ips, Clock::time_point deadline);

}  // namespace ftccl::transport
