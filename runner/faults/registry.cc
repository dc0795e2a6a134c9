#include "runner/faults/registry.h"

#include "runner/faults/bandwidth/bandwidth.h"
#include "runner/faults/blackhole/blackhole.h"
#include "runner/faults/conn_corrupt/conn_corrupt.h"
#include "runner/faults/conn_reset/conn_reset.h"
#include "runner/faults/corrupt/corrupt.h"
#include "runner/faults/delay/delay.h"
#include "runner/faults/jitter/jitter.h"
#include "runner/faults/link_down/link_down.h"
#include "runner/faults/link_flap/link_flap.h"
#include "runner/faults/loss/loss.h"
#include "runner/faults/port_drop/port_drop.h"
#include "runner/faults/qp_error/qp_error.h"
#include "runner/faults/rank_kill/rank_kill.h"
#include "runner/faults/rank_pause/rank_pause.h"
#include "runner/faults/reorder/reorder.h"

namespace faultline::runner::faults {

const std::vector<const FaultDescriptor*>& FaultDescriptors() {
  // Documentation order; beside each, the injector file of the kind.
  static const std::vector<const FaultDescriptor*> kinds = {
      &LinkDownFault(),     // injector/link_down.cc
      &LinkFlapFault(),     // injector/link_flap.cc
      &PortDropFault(),     // injector/port_drop.cc
      &BandwidthFault(),    // injector/bandwidth.cc
      &LossFault(),         // injector/loss.cc
      &BlackholeFault(),    // injector/blackhole.cc
      &DelayFault(),        // injector/netem.cc
      &JitterFault(),       // injector/netem.cc
      &CorruptFault(),      // injector/netem.cc
      &ReorderFault(),      // injector/netem.cc
      &ConnResetFault(),    // injector/conn_reset.cc
      &ConnCorruptFault(),  // injector/conn_corrupt.cc
      &QpErrorFault(),      // injector/qp_error.cc
      &RankPauseFault(),    // injector/rank_pause.cc
      &RankKillFault(),     // injector/rank_kill.cc
  };
  return kinds;
}

}  // namespace faultline::runner::faults
