// Collectives on Gloo (TCP transport) behind one small class, shared by gloo-perf and the
// runner's worker.
//
// Collectives: gloo::allreduce (ring or bcube), allgather, broadcast and alltoall from Gloo's
// options-based API; reducescatter, which that API lacks, runs Gloo's classic
// ReduceScatterHalvingDoubling (in place: the input is copied to a scratch buffer and this rank's
// block back to the output, both inside Run). The classic in-place allreduces (ring_chunked,
// halving_doubling) copy the input to the output first. Reductions run in the element type
// (f16/bf16 through float, rounded after each step); avg is a sum followed by one division by the
// rank count, as ftccl defines it.
//
// Rendezvous: a gloo::rendezvous::FileStore in a directory that every rank sees and that is
// private to this group (stale keys of an earlier group would be read as this one's). Gloo has one
// TCP pair per peer and no notion of rails: a rank binds its TCP device to one address.
//
// Deadlines: Connect and every collective of the options API take the timeout given; the classic
// algorithms (reducescatter, classic allreduces) wait with the connect timeout. Gloo reports
// failures as exceptions; none leaves this class: they become Status values. After an error the
// context may be unusable; destroy it. Not thread-safe; one rank is one process.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "workload/collective.h"

namespace gloo {
class Algorithm;
namespace rendezvous {
class Context;
}  // namespace rendezvous
}  // namespace gloo

namespace faultline::workload {

// Which Gloo allreduce runs: the options API's ring or bcube, or a classic in-place algorithm.
enum class GlooAllreduce { kRing, kBcube, kRingChunked, kHalvingDoubling };
const char* GlooAllreduceName(GlooAllreduce a);  // "ring", "bcube", "ring_chunked", ...
std::optional<GlooAllreduce> ParseGlooAllreduce(std::string_view name);

struct GlooTypeOps;  // implementation detail: the per-type reductions

struct GlooConnectOptions {
  int rank = 0;
  int size = 0;
  std::string address;                       // IPv4 address this rank's TCP device binds to
  std::string store_dir;                     // the FileStore directory (see above)
  std::chrono::milliseconds timeout{30000};  // rendezvous, connect, classic algorithms
  GlooAllreduce allreduce = GlooAllreduce::kRing;
};

class GlooCollectives final {
 public:
  // Connects the full mesh. On success *out holds the connected group.
  static Status Connect(const GlooConnectOptions& options, std::unique_ptr<GlooCollectives>* out);
  ~GlooCollectives();

  GlooCollectives(const GlooCollectives&) = delete;
  GlooCollectives& operator=(const GlooCollectives&) = delete;

  int rank() const;
  int size() const;

  // Builds what a classic algorithm needs for these buffers (reducescatter, classic allreduce);
  // a no-op for the options API. Every rank calls it with matching arguments before the first
  // Run of such a collective, and again whenever its buffers or count change.
  Status Prepare(const OpArgs& args);
  // Runs one collective to completion, or fails by `timeout` (see the class comment).
  // REQUIRES: Prepare(args) for a classic collective.
  Status Run(const OpArgs& args, std::chrono::milliseconds timeout);
  Status Barrier(std::chrono::milliseconds timeout);

 private:
  GlooCollectives(std::shared_ptr<gloo::rendezvous::Context> ctx, GlooAllreduce allreduce);
  const GlooTypeOps& OpsFor(DType t, RedOp op);
  bool IsClassic(const OpArgs& a) const;

  std::shared_ptr<gloo::rendezvous::Context> ctx_;
  GlooAllreduce allreduce_;
  std::map<std::pair<DType, RedOp>, std::unique_ptr<GlooTypeOps>> ops_;
  std::vector<char> scratch_;
  std::unique_ptr<gloo::Algorithm> classic_;  // reducescatter, or a classic allreduce
  std::optional<OpArgs> classic_args_;        // what classic_ was built for
};

}  // namespace faultline::workload
