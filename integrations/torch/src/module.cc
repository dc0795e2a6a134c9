// The Python module ftccl_torch._C: creates ProcessGroupFtccl for torch.distributed
// (registered under the name "ftccl" by ftccl_torch/__init__.py) and reads its events.
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "ftccl/version.h"
#include "process_group_ftccl.h"

namespace py = pybind11;
using faultline::torch_ftccl::ProcessGroupFtccl;

namespace {

// Backend.register_backend's creator: (store, rank, size, timeout) -> ProcessGroup.
c10::intrusive_ptr<c10d::ProcessGroup> Create(const c10::intrusive_ptr<c10d::Store>& store,
                                              int rank, int size,
                                              std::chrono::milliseconds timeout) {
  auto config = faultline::torch_ftccl::ConfigFromEnv();
  py::gil_scoped_release release;  // joining blocks; other Python threads go on
  return c10::make_intrusive<ProcessGroupFtccl>(store, rank, size, timeout, std::move(config));
}

ProcessGroupFtccl& AsFtccl(const c10::intrusive_ptr<c10d::ProcessGroup>& pg) {
  auto* p = dynamic_cast<ProcessGroupFtccl*>(pg.get());
  if (p == nullptr) throw py::type_error("not an ftccl process group");
  return *p;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "ftccl as a torch.distributed backend";
  faultline::torch_ftccl::SetGilReleaser([](const std::function<void()>& fn) {
    if (Py_IsInitialized() && PyGILState_Check()) {
      py::gil_scoped_release release;
      fn();
    } else {
      fn();
    }
  });
  m.def("create_process_group", &Create, py::arg("store"), py::arg("rank"), py::arg("size"),
        py::arg("timeout"));
  m.def("version", [] { return std::string(ftccl::Version()); });
  m.def(
      "drain_events",
      [](const c10::intrusive_ptr<c10d::ProcessGroup>& pg) {
        py::list out;
        for (const ftccl::Event& e : AsFtccl(pg).DrainEvents()) {
          py::dict d;
          d["t_ns"] = e.time_ns;
          d["kind"] = ftccl::EventKindName(e.kind);
          d["peer"] = e.peer;
          d["rail"] = e.rail;
          d["channel"] = e.channel;
          d["reason"] = e.reason;
          out.append(d);
        }
        return out;
      },
      "The group's ftccl events since the last call, oldest first.");
  m.def(
      "stats",
      [](const c10::intrusive_ptr<c10d::ProcessGroup>& pg) {
        ftccl::CommStats s = AsFtccl(pg).Stats();
        py::dict d;
        d["data_frames_sent"] = s.data_frames_sent;
        d["data_frames_received"] = s.data_frames_received;
        d["chunks_retransmitted"] = s.chunks_retransmitted;
        d["crc_errors"] = s.crc_errors;
        d["duplicates_dropped"] = s.duplicates_dropped;
        d["payload_bytes_sent_per_rail"] = s.payload_bytes_sent_per_rail;
        d["relay_payload_bytes_sent"] = s.relay_payload_bytes_sent;
        return d;
      },
      "The group's cumulative data-path counters.");
  m.def("knobs", [](const c10::intrusive_ptr<c10d::ProcessGroup>& pg) {
    return AsFtccl(pg).Knobs();
  });
  m.def("num_rails", [](const c10::intrusive_ptr<c10d::ProcessGroup>& pg) {
    return AsFtccl(pg).NumRails();
  });
  m.def(
      "shutdown",
      [](const c10::intrusive_ptr<c10d::ProcessGroup>& pg) { AsFtccl(pg).Shutdown(); },
      "Waits for the collectives already issued, then closes the group's connections in order.");
  m.def(
      "busy_since_ns",
      [](const c10::intrusive_ptr<c10d::ProcessGroup>& pg) { return AsFtccl(pg).BusySinceNs(); },
      "CLOCK_MONOTONIC ns at which the collective now running started; 0 when none runs.");
}
