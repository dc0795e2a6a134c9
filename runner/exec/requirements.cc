#include "runner/exec/requirements.h"

#include <sys/utsname.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "injector/netem.h"
#include "runner/core/inventory.h"
#include "runner/exec/torch_workload.h"
#include "runner/faults/registry.h"
#include "workload/adapters/ccl_traits.h"

namespace faultline::runner {
namespace {

using workload::adapters::CclNamesWhere;
using workload::adapters::CclTraits;
using workload::adapters::FindCclTraits;

// "a, b and c": the kinds whose descriptors need `feature`, in registry order.
std::string KindsNeeding(const std::string& feature) {
  std::vector<std::string> names;
  for (const faults::FaultDescriptor* d : faults::FaultDescriptors()) {
    const auto& fs = d->requires_features;
    if (std::find(fs.begin(), fs.end(), feature) != fs.end()) names.emplace_back(d->name);
  }
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  }
  return out;
}

// The entries of a directory, sorted; empty when it is absent or unreadable.
std::vector<std::string> DirEntries(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Whether a module list of the kernel (modules.dep, modules.builtin) names rdma_rxe.
bool ListsRxe(const std::string& file) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("/rdma_rxe.ko") != std::string::npos) return true;
  }
  return false;
}

}  // namespace

std::string VerbsMissingReason(const RdmaSysPaths& paths) {
  const std::vector<std::string> devices = DirEntries(paths.ib_class);
  if (devices.empty()) {
    std::string modules = paths.kernel_modules;
    if (modules.empty()) {
      struct utsname u {};
      if (::uname(&u) == 0) modules = std::string("/lib/modules/") + u.release;
    }
    std::string rxe;
    if (std::filesystem::exists(paths.sys_module + "/rdma_rxe")) {
      rxe = "rdma_rxe is loaded, but no rxe device was added (rdma link add NAME type rxe "
            "netdev DEV)";
    } else if (!modules.empty() &&
               (ListsRxe(modules + "/modules.dep") || ListsRxe(modules + "/modules.builtin"))) {
      rxe = "the kernel has rdma_rxe, but it is not loaded (modprobe rdma_rxe)";
    } else {
      rxe = "the kernel has no rdma_rxe module for soft-RoCE";
    }
    return "no RDMA device on this machine (" + paths.ib_class + " lists none; " + rxe +
           "): qp_error needs a verbs QP to fail";
  }
  std::string names;
  for (size_t i = 0; i < devices.size(); ++i) names += (i == 0 ? "" : ", ") + devices[i];
  return "RDMA devices exist (" + names +
         "), but faultline run puts none on its rails: its topology is veth pairs in per-host "
         "network namespaces with ftccl over TCP, so qp_error has no verbs QP to fail (place "
         "the scenario on RDMA ports with --inventory HOSTS, as tests/rdma-lab does)";
}

std::optional<std::string> InventoryVerbsMissing(const Topology& t, std::string_view ccl,
                                                 const RdmaSysPaths& paths) {
  // qp_error fails a queue pair through the rank's fault hook: the library needs both.
  auto hook_reaches_qps = [](const CclTraits& c) {
    return c.has_queue_pairs && c.serves_fault_hook;
  };
  const CclTraits* traits = FindCclTraits(ccl);
  if (traits == nullptr || !hook_reaches_qps(*traits)) {
    return "ccl " + std::string(ccl) + " has no verbs QP a fault hook can fail (qp_error needs " +
           CclNamesWhere(hook_reaches_qps) + "'s verbs transport)";
  }
  for (const InventoryHost& h : t.inventory) {
    for (const InventoryRail& r : h.rails) {
      if (!r.is_rdma()) {
        return "inventory host " + h.name + " rail " + r.netdev + " names no RDMA port (rdma:), " +
               "so " + std::string(ccl) + " runs over TCP there and qp_error has no verbs QP to " +
               "fail";
      }
    }
  }
  if (!IsLocalInventory(t)) return std::nullopt;  // real hosts: their own RDMA devices
  const std::vector<std::string> devices = DirEntries(paths.ib_class);
  for (const InventoryHost& h : t.inventory) {
    for (const InventoryRail& r : h.rails) {
      if (std::find(devices.begin(), devices.end(), r.rdma) == devices.end()) {
        return "inventory host " + h.name + " rail " + r.netdev + ": RDMA device " + r.rdma +
               " is not on this machine (" + paths.ib_class + " lists " +
               (devices.empty() ? std::string("none") : std::to_string(devices.size())) + ")";
      }
    }
  }
  return std::nullopt;
}

std::vector<std::string> RequiredFeatures(const Scenario& sc) {
  std::vector<std::string> out = sc.requirements;
  auto add = [&](const char* f) {
    if (std::find(out.begin(), out.end(), f) == out.end()) out.push_back(f);
  };
  if (sc.workload.kind == WorkloadKind::kTorchDdp) add("torch");
  for (const auto& f : sc.faults) {
    for (const std::string& feature : f.descriptor().requires_features) add(feature.c_str());
  }
  return out;
}

std::optional<std::string> RequirementChecker::Missing(const std::vector<std::string>& features,
                                                       std::string_view ccl,
                                                       const Topology* topology) {
  for (const auto& f : features) {
    if (f == "verbs" && topology != nullptr && topology->is_inventory()) {
      if (auto why = InventoryVerbsMissing(*topology, ccl)) return why;
      continue;
    }
    const CclTraits* traits = FindCclTraits(ccl);
    if (f == "fault_hook" && (traits == nullptr || !traits->serves_fault_hook)) {
      return "ccl " + std::string(ccl) + " serves no fault hook (" + KindsNeeding("fault_hook") +
             " need ranks that serve injector/FAULT_HOOK.md; only " +
             CclNamesWhere([](const CclTraits& c) { return c.serves_fault_hook; }) + " does)";
    }
    // What torch needs depends on the ccl (its backend); probed once per ccl.
    const std::string key = f == "torch" ? f + ":" + std::string(ccl) : f;
    auto it = cache_.find(key);
    if (it == cache_.end()) it = cache_.emplace(key, Probe(key)).first;
    if (it->second) return it->second;
  }
  return std::nullopt;
}

std::optional<std::string> RequirementChecker::Probe(const std::string& feature) {
  if (feature == "sch_netem") {
    Status st = ProbeNetem();
    if (st.ok()) return std::nullopt;
    if (st.code() == Code::kUnavailable) return std::string("kernel lacks sch_netem");
    return "cannot tell whether the kernel has sch_netem: " + st.ToString();
  }
  if (feature == "fault_hook") {
    const std::string cmd = "'" + worker_path_ + "' --help 2>&1";
    FILE* p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) return "cannot run " + worker_path_ + " --help";
    std::string help;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) help.append(buf, n);
    ::pclose(p);
    if (help.find("--fault-hook") != std::string::npos) return std::nullopt;
    return CclNamesWhere([](const CclTraits& c) { return c.serves_fault_hook; }) +
           " ranks serve no fault hook (" + worker_path_ +
           " has no --fault-hook option; see injector/FAULT_HOOK.md)";
  }
  if (feature.rfind("torch:", 0) == 0) return ProbeTorch(feature.substr(6));
  if (feature == "verbs") return VerbsMissingReason();
  return "unknown requirement '" + feature + "'";
}

int VisibleGpus(const std::string& dev_dir) {
  int nodes = 0;
  for (const std::string& e : DirEntries(dev_dir)) {
    if (e.size() > 6 && e.compare(0, 6, "nvidia") == 0 &&
        std::all_of(e.begin() + 6, e.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      ++nodes;
    }
  }
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible == nullptr) return nodes;
  int listed = 0;
  for (std::string_view v = visible; !v.empty();) {
    const size_t comma = v.find(',');
    if (!v.substr(0, comma).empty()) ++listed;
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
  return std::min(nodes, listed);
}

std::optional<std::string> CclRunRefusal(const CclTraits& ccl, int world, bool local,
                                         const std::string& dev_dir) {
  const std::string name(ccl.name);
  if (!ccl.built_here) {
    return "ccl " + name + " needs " + std::string(ccl.built_from) +
           ", which this build does not have (" + std::string(ccl.how_to_build) + ")";
  }
  if (ccl.launch == workload::adapters::LaunchStyle::kMpiLauncher && !local) {
    return "ccl " + name +
           " starts its ranks through its own launcher (mpirun), which faultline run drives on "
           "the namespace topology of this machine only, not through --launcher slurm yet";
  }
  if (ccl.needs_own_gpu && local) {
    const int gpus = VisibleGpus(dev_dir);
    if (gpus < world) {
      return "ccl " + name + " needs a GPU of its own for each rank (two ranks of " +
             "one group cannot share a device), and this run puts " + std::to_string(world) +
             " ranks on this machine, which shows " + std::to_string(gpus) + " (" + dev_dir +
             "/nvidia<N>, CUDA_VISIBLE_DEVICES)";
    }
  }
  return std::nullopt;
}

}  // namespace faultline::runner
