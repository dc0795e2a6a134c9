#include "runner/worker/port_watch.h"

#include <cstdio>
#include <utility>

#include "base/ifaddr.h"

namespace faultline::runner {
namespace {

class KernelPorts final : public PortSource {
 public:
  explicit KernelPorts(LinkWatch watch) : watch_(std::move(watch)) {}
  Result<PortState> Get(const std::string& name) override { return watch_.Get(name); }

 private:
  LinkWatch watch_;
};

// The interfaces of the rails (each an IPv4 address, found on the interface that holds it, or
// an interface name), as the kernel lists them now; a rail found nowhere is left out.
std::vector<std::string> RailInterfaces(const std::vector<std::string>& rails) {
  std::vector<std::string> names;
  for (const std::string& rail : rails) {
    if (auto dev = InterfaceWithIpv4(rail); dev.ok()) {
      names.push_back(*dev);
    } else if (InterfaceIpv4(rail).ok()) {
      names.push_back(rail);
    }
  }
  return names;
}

}  // namespace

PortWatch PortWatch::ForRails(int rank, std::vector<std::string> rails) {
  return PortWatch(
      rank,
      []() -> Result<std::unique_ptr<PortSource>> {
        auto watch = LinkWatch::Open();
        if (!watch.ok()) return watch.status();
        return std::unique_ptr<PortSource>(std::make_unique<KernelPorts>(std::move(watch).value()));
      },
      [rails = std::move(rails)] { return RailInterfaces(rails); });
}

bool PortWatch::Open() {
  if (off_) return false;
  if (source_ != nullptr) return true;
  auto source = factory_();
  if (!source.ok() || *source == nullptr) {
    std::fprintf(stderr, "faultline-worker: rank %d: not watching its ports: %s\n", rank_,
                 source.ok() ? "no port source" : source.status().ToString().c_str());
    off_ = true;
    return false;
  }
  source_ = std::move(source).value();
  names_ = interfaces_();
  return true;
}

bool PortWatch::AllUp() {
  if (!Open() || names_.empty()) return false;
  for (const std::string& name : names_) {
    auto port = source_->Get(name);
    if (!port.ok() || !port->running) return false;
  }
  return true;
}

void PortWatch::Look(bool fault_on) {
  if (!Open()) return;
  bool down = false;
  std::vector<uint32_t> changes;
  for (const std::string& name : names_) {
    auto port = source_->Get(name);
    if (!port.ok()) {
      down = true;  // gone: a port removed
      changes.push_back(0);
      continue;
    }
    if (!port->running) down = true;
    changes.push_back(port->carrier_changes);
  }
  if (!fault_on) {
    changes_ = std::move(changes);
    own_port_down_ = false;
    return;
  }
  if (changes_.size() == changes.size() && changes_ != changes) down = true;
  if (down) own_port_down_ = true;
}

}  // namespace faultline::runner
