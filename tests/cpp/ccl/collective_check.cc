#include "collective_check.h"

#include <memory>
#include <sstream>

#include "reference.h"

namespace ftccl::test {
namespace {

constexpr int kDetailedMismatches = 3;

// Checks `got` against `expected(i)` for i in [0, count); reports the first few differences.
template <typename Expected>
size_t CheckElements(const CollCase& c, const char* what, const void* got, size_t count,
                     RankReporter& reporter, Expected expected) {
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    const uint64_t want = expected(i);
    const uint64_t have = LoadBits(got, c.dt, i);
    if (want == have) continue;
    if (++wrong <= kDetailedMismatches) {
      std::ostringstream os;
      os << c.Name() << ": " << what << " element " << i << ": got " << FormatBits(c.dt, have)
         << ", expected " << FormatBits(c.dt, want);
      reporter.Fail(os.str());
    }
  }
  if (wrong > kDetailedMismatches) {
    reporter.Fail(c.Name() + ": " + what + ": " + std::to_string(wrong) + " of " +
                  std::to_string(count) + " elements wrong in all");
  }
  return wrong;
}

}  // namespace

std::string CollCase::Name() const {
  std::ostringstream os;
  os << CollKindName(kind) << " " << DataTypeName(dt);
  if (IsReducing(kind)) os << " " << ReduceOpName(op);
  os << " count=" << count;
  if (kind == CollKind::kBroadcast || kind == CollKind::kReduce) os << " root=" << root;
  if (misalign != 0) os << " misalign=" << misalign;
  if (null_recv_off_root) os << " null-recv-off-root";
  os << " salt=" << salt;
  return os.str();
}

bool IsReducing(CollKind kind) {
  return kind == CollKind::kAllReduce || kind == CollKind::kReduceScatter ||
         kind == CollKind::kReduce;
}

bool HasBlocks(CollKind kind) {
  return kind == CollKind::kAllGather || kind == CollKind::kReduceScatter ||
         kind == CollKind::kAllToAll;
}

Status CallCollective(Communicator& comm, const CollCase& c, const void* send, void* recv,
                      Millis timeout) {
  switch (c.kind) {
    case CollKind::kAllReduce:
      return comm.AllReduce(send, recv, c.count, c.dt, c.op, timeout);
    case CollKind::kAllGather:
      return comm.AllGather(send, recv, c.count, c.dt, timeout);
    case CollKind::kReduceScatter:
      return comm.ReduceScatter(send, recv, c.count, c.dt, c.op, timeout);
    case CollKind::kBroadcast:
      return comm.Broadcast(send, recv, c.count, c.dt, c.root, timeout);
    case CollKind::kReduce:
      return comm.Reduce(send, recv, c.count, c.dt, c.op, c.root, timeout);
    case CollKind::kAllToAll:
      return comm.AllToAll(send, recv, c.count, c.dt, timeout);
    case CollKind::kBarrier:
      return comm.Barrier(timeout);
  }
  return Internal("unknown collective kind");
}

Status RunAndCheck(Communicator& comm, const CollCase& c, RankReporter& reporter, bool* correct,
                   Millis timeout) {
  *correct = false;
  const int n = comm.size();
  const int rank = comm.rank();
  const size_t es = DataTypeSize(c.dt);
  const size_t blocks = HasBlocks(c.kind) ? static_cast<size_t>(n) : 1;
  const size_t send_count = (c.kind == CollKind::kReduceScatter || c.kind == CollKind::kAllToAll)
                                ? c.count * blocks
                                : c.count;
  const size_t recv_count = (c.kind == CollKind::kAllGather || c.kind == CollKind::kAllToAll)
                                ? c.count * blocks
                                : c.count;
  const bool is_root = rank == c.root;

  const ReduceRef reduce_ref(c.dt, c.op, c.salt);
  const MoveRef move_ref(c.dt, c.salt);
  const MoveRef decoy_ref(c.dt, c.salt ^ 0xbadULL);
  // Every element is written below: no fill first.
  GuardedBuffer send(send_count * es, c.misalign, /*fill=*/false);
  for (size_t i = 0; i < send_count; ++i) {
    uint64_t bits;
    switch (c.kind) {
      case CollKind::kAllReduce:
      case CollKind::kReduceScatter:
      case CollKind::kReduce:
        bits = reduce_ref.InputBits(rank, i);
        break;
      case CollKind::kBroadcast:
        // Off the root the send buffer must not be read: fill it with data that would show.
        bits = (is_root ? move_ref : decoy_ref).Bits(rank, i);
        break;
      default:
        bits = move_ref.Bits(rank, i);
        break;
    }
    StoreBits(send.data(), c.dt, i, bits);
  }
  const uint64_t send_digest = send.Digest();

  const bool recv_null = c.kind == CollKind::kReduce && !is_root && c.null_recv_off_root;
  GuardedBuffer recv(recv_null ? 0 : recv_count * es, c.misalign);

  Status status = CallCollective(comm, c, send.data(), recv_null ? nullptr : recv.data(), timeout);
  if (!status.ok()) return status;

  size_t wrong = 0;
  switch (c.kind) {
    case CollKind::kAllReduce:
      wrong = CheckElements(c, "recv", recv.data(), recv_count, reporter,
                            [&](size_t i) { return reduce_ref.ExpectedBits(n, i); });
      break;
    case CollKind::kReduce:
      if (is_root) {
        wrong = CheckElements(c, "recv on root", recv.data(), recv_count, reporter,
                              [&](size_t i) { return reduce_ref.ExpectedBits(n, i); });
      } else if (!recv_null && !recv.Untouched()) {
        reporter.Fail(c.Name() + ": recv buffer written on non-root rank " + std::to_string(rank));
        ++wrong;
      }
      break;
    case CollKind::kReduceScatter:
      wrong = CheckElements(c, "recv", recv.data(), recv_count, reporter, [&](size_t i) {
        return reduce_ref.ExpectedBits(n, rank * c.count + i);
      });
      break;
    case CollKind::kAllGather:
      wrong = CheckElements(c, "recv", recv.data(), recv_count, reporter, [&](size_t i) {
        return move_ref.Bits(static_cast<int>(i / c.count), i % c.count);
      });
      break;
    case CollKind::kBroadcast:
      wrong = CheckElements(c, "recv", recv.data(), recv_count, reporter,
                            [&](size_t i) { return move_ref.Bits(c.root, i); });
      break;
    case CollKind::kAllToAll:
      // Block j came from rank j: it is rank j's send block `rank`.
      wrong = CheckElements(c, "recv", recv.data(), recv_count, reporter, [&](size_t i) {
        const size_t from = i / c.count;
        return move_ref.Bits(static_cast<int>(from), rank * c.count + i % c.count);
      });
      break;
    case CollKind::kBarrier:
      break;
  }
  const std::string recv_guard = recv.CheckGuards();
  if (!recv_guard.empty()) {
    reporter.Fail(c.Name() + ": recv: " + recv_guard);
    ++wrong;
  }
  const std::string send_guard = send.CheckGuards();
  if (!send_guard.empty() || send.Digest() != send_digest) {
    reporter.Fail(c.Name() + ": the send buffer was modified " + send_guard);
    ++wrong;
  }
  *correct = wrong == 0;
  return status;
}

void ReportStats(const Communicator& comm, RankReporter& reporter) {
  const CommStats s = comm.Stats();
  reporter.Value("data_frames_sent", static_cast<int64_t>(s.data_frames_sent));
  reporter.Value("data_frames_received", static_cast<int64_t>(s.data_frames_received));
  reporter.Value("chunks_retransmitted", static_cast<int64_t>(s.chunks_retransmitted));
  reporter.Value("crc_errors", static_cast<int64_t>(s.crc_errors));
  reporter.Value("duplicates_dropped", static_cast<int64_t>(s.duplicates_dropped));
  reporter.Value("out_of_order", static_cast<int64_t>(s.out_of_order));
  reporter.Value("acks_sent", static_cast<int64_t>(s.acks_sent));
  reporter.Value("nacks_sent", static_cast<int64_t>(s.nacks_sent));
  for (size_t rail = 0; rail < s.payload_bytes_sent_per_rail.size(); ++rail) {
    reporter.Value("payload_bytes_rail" + std::to_string(rail),
                   static_cast<int64_t>(s.payload_bytes_sent_per_rail[rail]));
  }
}

}  // namespace ftccl::test
