// RunWorker: the thin coordinator of one rank. Rank (rank.h) opens the log and the library;
// the workload's loop (collective_loop.h, train_loop.h) runs; Rank bounds the teardown.
#include "runner/worker/worker.h"

#include "runner/worker/collective_loop.h"
#include "runner/worker/rank.h"
#include "runner/worker/train_loop.h"

namespace faultline::runner {

int RunWorker(const WorkerOptions& options) {
  Rank rank(options);
  const int opened = rank.Open();
  if (opened != kWorkerExitOk) return opened;
  // The loops' control buffers outlive the library's teardown in Finish.
  if (options.workload == "train") {
    TrainLoop loop(&rank);
    return rank.Finish(loop.Run());
  }
  CollectiveLoop loop(&rank);
  return rank.Finish(loop.Run());
}

}  // namespace faultline::runner
