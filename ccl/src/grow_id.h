// The grow id: what a communicator's members and the ranks joining it must share to grow it
// (Communicator::GrowId, Grow, Join). It names the parent (its id and how many grows of it were
// started before), the sizes before and after, where the parent's rank 0 listens for the new
// group's bootstrap, and the group's key; the joiners' key is derived from it, so a joiner
// holding a stale id (another parent, an earlier grow, other sizes) is refused by the root.
//
// Text form: "ftccl-grow:1:<comm id hex>:<epoch>:<old size>:<new size>:<a.b.c.d:port>:<key hex>".
// Pure; thread-compatible.
#pragma once

#include <cstdint>
#include <string>

#include "ftccl/status.h"
#include "net.h"

namespace ftccl {

struct GrowTicket {
  uint64_t comm_id = 0;
  uint64_t epoch = 0;  // 1 for the first grow of the parent, 2 for the next, ...
  int old_size = 0;
  int new_size = 0;
  net::Endpoint root;
  uint64_t key = 0;  // GrowKey(comm_id, epoch, old_size, new_size)

  std::string ToString() const;
};

// The members' key of a grow; never 0.
uint64_t GrowKey(uint64_t comm_id, uint64_t epoch, int old_size, int new_size);
// The joiners' key of the grow whose members' key is `key`; never 0, never `key`.
uint64_t JoinerKey(uint64_t key);

// Parses and checks a grow id: every field present, new_size > old_size >= 1, a root address,
// and a key that matches the other fields. kInvalidArgument naming what is wrong otherwise.
Result<GrowTicket> ParseGrowId(const std::string& text);

}  // namespace ftccl
