// Bootstrap over TCP on the management network: rank 0 listens, the others connect; every rank
// sends its rail endpoints and receives everyone's, plus the communicator id. A final
// Ready() round is a barrier that also carries setup errors to every rank.
//
// Not thread-safe; used only by Communicator::Create.
#pragma once

#include <memory>
#include <vector>

#include "ftccl/communicator.h"
#include "net.h"

namespace ftccl {

struct BootstrapTable {
  uint64_t comm_id = 0;
  int size = 0;
  int num_rails = 0;
  // rails[rank][rail]: the data listener of `rank` on `rail`.
  std::vector<std::vector<net::Endpoint>> rails;
  // hosts[rank]: which machine (and network namespace) the rank runs on; ranks with equal
  // keys reach each other over a Unix socket (the intra-host relay).
  std::vector<uint64_t> hosts;
  // spares[rank]: a listener `rank` keeps open on its management address for the bootstrap of
  // a communicator shrunk from this one (Communicator::Shrink), whichever survivor is its root.
  std::vector<net::Endpoint> spares;
};

// Which group a bootstrap forms. `key` 0: a new communicator; otherwise the shrink's or the
// grow's key, which every member computes from the parent. A grow also admits joiners: ranks
// from `first_joiner` on, which hold `joiner_key` (from the grow id) instead of `key`.
struct GroupKey {
  uint64_t key = 0;
  uint64_t joiner_key = 0;  // 0: nobody joins from outside the parent
  int first_joiner = 0;     // meaningful only with a joiner_key
};

// This process's host key: its host name and network namespace, hashed. Ranks of one host
// in one namespace share it; "FTCCL_HOST_ID" (any text) overrides it.
uint64_t LocalHostKey();

class Bootstrap final {
 public:
  // Joins the group. `my_rails` are this rank's data listeners. `group` names the group being
  // formed (GroupKey); a rank sends the key it holds (a joiner its joiner_key). The root
  // refuses a rank whose key differs from the group's, and a joiner that claims a rank of the
  // parent (or a member that claims a joiner's rank, or a rank already taken by a joiner):
  // that connection only, so a rank that disagrees about a shrink or holds a stale grow id
  // cannot break the others' group. On another failure every reachable rank gets the reason.
  static Result<std::unique_ptr<Bootstrap>> Join(const CommOptions& options,
                                                 const std::vector<net::Endpoint>& my_rails,
                                                 const GroupKey& group, Clock::time_point deadline);
  ~Bootstrap() = default;
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  const BootstrapTable& table() const { return table_; }
  // This rank's spare listener (table().spares[rank]), handed to the communicator.
  net::Fd TakeSpare() { return std::move(spare_); }

  // Barrier after connection setup. `local` is this rank's own setup result; the call
  // succeeds only if every rank succeeded, otherwise returns the first failure (with its rank).
  Status Ready(const Status& local, Clock::time_point deadline);

 private:
  Bootstrap(int rank) : rank_(rank) {}
  Status JoinAsRoot(const CommOptions& options, const std::vector<net::Endpoint>& my_rails,
                    const GroupKey& group, Clock::time_point deadline);
  Status JoinAsPeer(const CommOptions& options, const std::vector<net::Endpoint>& my_rails,
                    uint64_t group_key, Clock::time_point deadline);
  // Opens the spare listener on `ip` (the address the other ranks reached this one at).
  Status OpenSpare(uint32_t ip);
  void BroadcastError(const std::string& text, Clock::time_point deadline, Code code);

  int rank_;
  BootstrapTable table_;
  net::Fd spare_;
  net::Fd root_;                // non-root ranks: the connection to rank 0
  std::vector<net::Fd> peers_;  // rank 0: the connection of every other rank
};

}  // namespace ftccl
