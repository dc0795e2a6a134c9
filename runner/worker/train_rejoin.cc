// TrainLoop's rejoin after repair (train_loop.h): ranks a shrink left out come back through
// the library's Grow and take the group's state.
//
// The out-of-band channel is checkpoint_dir/rejoin/ (shared by the job's ranks, as on one
// machine; a fleet needs it on shared storage): a left-out rank whose ports are back writes
// i<incarnation>-ready-<rank>; the group's rank 0 sees it at a step, the members agree on the
// joiners in a control allreduce, rank 0 makes the grow id, shares it with the members in
// another and writes it (with the grown group's order) to i<incarnation>-grow-<rank> for each
// joiner; everyone then grows. i<incarnation>-closed says the members are done.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "runner/worker/train_loop.h"

namespace faultline::runner {
namespace {

namespace fs = std::filesystem;

// The grow id travels one character per i64 (max-reduced: the coordinator's against zeros).
constexpr size_t kGrowIdChars = 256;

bool WriteAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << text;
    if (!f.good()) return false;
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  return !ec;
}

}  // namespace

std::string TrainLoop::RejoinPath(const std::string& what, int rank) const {
  // Appended piece by piece (GCC 12 warns falsely on a "literal" + string chain).
  std::string path = o_.checkpoint_dir;
  path += "/rejoin/i";
  path += std::to_string(o_.incarnation);
  path += '-';
  path += what;
  if (rank >= 0) {
    path += '-';
    path += std::to_string(rank);
  }
  return path;
}

void TrainLoop::CloseRejoin() {
  if (!RejoinOn() || left_out_) return;
  std::error_code ec;
  fs::create_directories(o_.checkpoint_dir + "/rejoin", ec);
  WriteAtomically(RejoinPath("closed"), "done\n");
}

int TrainLoop::MaybeGrow(bool* again) {
  *again = false;
  if (!RejoinOn() || rank_.group_size() == o_.size) return kWorkerExitOk;
  if (o_.rejoin == "at_checkpoint" && step_ % o_.checkpoint_every != 0) return kWorkerExitOk;
  const bool coordinator = rank_.group_rank() == 0;
  std::vector<int64_t> v(o_.size, 0);
  if (coordinator) {
    std::error_code ec;
    for (int r : rank_.excluded()) v[r] = fs::exists(RejoinPath("ready", r), ec) ? 1 : 0;
  }
  Status st = Control(&v, "rejoin check");
  if (!st.ok()) {
    *again = true;
    return AfterFailedCall("rejoin check", NowNs(), st);
  }
  GrowRecord g;
  g.rank = o_.rank;
  g.start_ns = NowNs();
  for (int r = 0; r < o_.size; ++r) {
    if (v[r] != 0) g.joined.push_back(r);
  }
  if (g.joined.empty()) return kWorkerExitOk;
  *again = true;
  std::vector<int64_t> id_chars(1 + kGrowIdChars, 0);
  if (coordinator) {
    auto id = rank_.ccl().GrowId(g.joined);
    if (!id.ok()) {
      std::fprintf(stderr, "faultline-worker: rank %d: no grow id: %s\n", o_.rank,
                   id.status().ToString().c_str());
    } else if (id->size() > kGrowIdChars) {
      std::fprintf(stderr, "faultline-worker: rank %d: grow id longer than %zu characters\n",
                   o_.rank, kGrowIdChars);
    } else {
      id_chars[0] = 1;
      for (size_t i = 0; i < id->size(); ++i) id_chars[1 + i] = static_cast<unsigned char>((*id)[i]);
    }
  }
  st = Control(&id_chars, "grow id");
  if (!st.ok()) return AfterFailedCall("grow id", NowNs(), st);
  auto failed = [&](const std::string& why) {
    g.end_ns = NowNs();
    g.group = rank_.group_size();
    g.ok = false;
    g.error = why;
    *again = false;  // the step runs in the group as it is; the next one tries again
    if (!rank_.log().Write(WorkerGrowLine(g))) return rank_.InternalFailure("cannot write the log");
    return kWorkerExitOk;  // the group is unchanged and goes on; the joiners wait on
  };
  if (id_chars[0] == 0) return failed("the group's rank 0 could not make a grow id");
  std::string id;
  for (size_t i = 1; i < id_chars.size() && id_chars[i] != 0; ++i) {
    id.push_back(static_cast<char>(id_chars[i]));
  }
  if (coordinator) {
    std::vector<int> members = rank_.Members();
    members.insert(members.end(), g.joined.begin(), g.joined.end());
    std::string order, joined;
    // Appended piece by piece (GCC 12 warns falsely on a "literal" + string chain).
    for (int r : members) {
      if (!order.empty()) order += ' ';
      order += std::to_string(r);
    }
    for (int r : g.joined) {
      if (!joined.empty()) joined += ' ';
      joined += std::to_string(r);
    }
    for (int r : g.joined) {
      std::error_code ec;
      fs::remove(RejoinPath("ready", r), ec);
      if (!WriteAtomically(RejoinPath("grow", r), id + "\n" + order + "\n" + joined + "\n")) {
        std::fprintf(stderr, "faultline-worker: rank %d: cannot hand rank %d the grow id\n",
                     o_.rank, r);
      }
    }
  }
  st = rank_.GrowWith(id, g.joined);
  if (!st.ok()) return failed(st.ToString());
  const int code = TakeGroupState(/*joiner=*/false);
  if (code != kWorkerExitOk) return code;
  g.end_ns = NowNs();
  g.group = rank_.group_size();
  if (!rank_.log().Write(WorkerGrowLine(g))) return rank_.InternalFailure("cannot write the log");
  return kWorkerExitOk;
}

int TrainLoop::Rejoin(const std::string& why) {
  left_out_ = true;
  const int64_t first_fault_ns = paths_.first_fault_ns().value_or(NowNs());
  std::fprintf(stderr, "faultline-worker: rank %d: %s; waits for its ports to rejoin\n", o_.rank,
               why.c_str());
  std::error_code ec;
  fs::create_directories(o_.checkpoint_dir + "/rejoin", ec);
  GrowRecord g;
  g.rank = o_.rank;
  g.joiner = true;
  bool ready = false;
  std::string id;
  std::vector<int> members;
  // The repair is judged by this rank's own ports: down when it was left out (or seen down
  // since) and all up again. A rank whose ports never went down cannot see the fault end
  // elsewhere; it offers itself once the wait bound has passed, and a fault still on then
  // leaves it out again at the group's next boundary.
  const int64_t left_ns = NowNs();
  bool seen_down = ports_.own_port_down();
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const bool up = ports_.AllUp();
    seen_down = seen_down || !up;
    if (!ready && up && (seen_down || NowNs() - left_ns >= ToNs(o_.wait_bound))) {
      g.start_ns = NowNs();  // the repair, as this rank sees it
      if (!WriteAtomically(RejoinPath("ready", o_.rank), "ready\n")) {
        return rank_.Fail(why + "; cannot write " + RejoinPath("ready", o_.rank), first_fault_ns);
      }
      ready = true;
    }
    std::ifstream f(RejoinPath("grow", o_.rank));
    if (f) {
      std::string order, joined;
      std::getline(f, id);
      std::getline(f, order);
      std::getline(f, joined);
      std::istringstream in(order), jin(joined);
      for (int r; in >> r;) members.push_back(r);
      for (int r; jin >> r;) g.joined.push_back(r);
      fs::remove(RejoinPath("grow", o_.rank), ec);
      break;
    }
    if (fs::exists(RejoinPath("closed"), ec)) {
      return rank_.Fail(why + "; the group finished before this rank could rejoin",
                        first_fault_ns);
    }
  }
  workload::adapters::CclInit init = rank_.InitOf();
  if (policy_->WaitsForLostPeers()) init.peer_loss_timeout = o_.wait_bound;
  const Status st = rank_.JoinGrown(init, id, members);
  if (!st.ok()) return rank_.Fail(why + "; rejoin: " + st.ToString(), first_fault_ns);
  left_out_ = false;
  // The old communicator's view of the paths is gone with it.
  std::vector<int> others;
  for (int r = 0; r < o_.size; ++r) {
    if (r != o_.rank) others.push_back(r);
  }
  paths_.ForgetRanks(others);
  paths_.ClearNews(/*all=*/true);
  const int code = TakeGroupState(/*joiner=*/true);
  if (code != kWorkerExitOk) return code;
  g.end_ns = NowNs();
  g.group = rank_.group_size();
  if (!rank_.log().Write(WorkerGrowLine(g))) return rank_.InternalFailure("cannot write the log");
  rejoined_ = true;
  return kWorkerExitOk;
}

int TrainLoop::TakeGroupState(bool joiner) {
  Status st = rank_.Prepare(args_);
  if (!st.ok()) return rank_.Fail("prepare after the grow: " + st.ToString(), NowNs());
  // The step and samples done and the last checkpoint's step: the members' (they agree; the
  // joiners offer -1).
  std::vector<int64_t> v = {joiner ? -1 : step_, joiner ? -1 : static_cast<int64_t>(base_),
                            joiner ? -1 : last_ckpt_step_};
  st = Control(&v, "rejoin state");
  if (!st.ok()) return rank_.Fail("rejoin state: " + st.ToString(), NowNs());
  // The parameters: the group's rank 0's, broadcast; only the joiners take them.
  if (rank_.group_rank() == 0) std::memcpy(rank_.send(), params_.data(), Params() * 4);
  workload::OpArgs a = args_;
  a.coll = workload::Coll::kBroadcast;
  a.count = Params();
  a.redop = workload::RedOp::kSum;
  a.root = 0;
  st = rank_.RunCall("rejoin parameters", a);
  rank_.DrainEvents();
  if (!st.ok()) return rank_.Fail("rejoin parameters: " + st.ToString(), NowNs());
  if (joiner) {
    std::memcpy(params_.data(), rank_.recv(), Params() * 4);
    step_ = v[0];
    base_ = static_cast<uint64_t>(v[1]);
    prev_base_ = base_;
    last_ckpt_step_ = v[2];
  }
  // The grown group agrees at its first boundary, and its pace is the reference from here.
  boundary_from_step_ = step_;
  attention_ = true;
  clean_steps_ = 0;
  clean_step_ns_ = 0;
  clean_ar_ns_ = 0;
  ref_rates_.clear();
  return kWorkerExitOk;
}

}  // namespace faultline::runner
