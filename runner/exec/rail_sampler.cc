#include "runner/exec/rail_sampler.h"

#include <fcntl.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <future>

#include "base/clock.h"
#include "base/fd.h"
#include "injector/netns.h"
#include "injector/realtime_scope.h"

namespace faultline::runner {

// One namespace: its socket and the ports read from its dumps (indices into ports_).
struct RailSampler::Namespace {
  std::string name;
  UniqueFd fd;
  std::vector<size_t> ports;
  uint32_t seq = 0;
};

namespace {

constexpr size_t kRecvBuf = 64 * 1024;
// Longest time reading one sample may take before the sample's time no longer stands for it.
constexpr int64_t kMaxReadSpreadNs = 2'000'000;

Result<UniqueFd> OpenRtnl() {
  UniqueFd fd(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
  if (!fd.valid()) return ErrnoStatus("socket(NETLINK_ROUTE)", errno);
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    return ErrnoStatus("bind(NETLINK_ROUTE)", errno);
  }
  // A reply that never comes must not stall the sampler.
  timeval tv{0, 200'000};
  setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

// Opens the socket inside `netns` (empty: here) on the calling thread.
Status OpenIn(const std::string& netns, UniqueFd* out) {
  if (netns.empty()) {
    FL_ASSIGN_OR_RETURN(*out, OpenRtnl());
    return Status::Ok();
  }
  FL_ASSIGN_OR_RETURN(ScopedNetns in, ScopedNetns::Enter(netns));
  FL_ASSIGN_OR_RETURN(*out, OpenRtnl());
  return Status::Ok();
}

// Reads a sysfs counter file (a decimal number) from offset 0.
bool ReadCounter(int fd, char* buf, size_t len, uint64_t* out) {
  ssize_t n = pread(fd, buf, len - 1, 0);
  if (n <= 0) return false;
  buf[n] = '\0';
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(buf, &end, 10);
  if (errno != 0 || end == buf) return false;
  *out = v;
  return true;
}

}  // namespace

RailSampler::RailSampler(std::vector<RailSamplerPort> ports, RailSamplerOptions options)
    : ports_(std::move(ports)), options_(std::move(options)) {}

Result<std::unique_ptr<RailSampler>> RailSampler::Start(std::vector<RailSamplerPort> ports,
                                                        RailSamplerOptions options) {
  if (ports.empty()) return InvalidArgument("rail sampler: no port to sample");
  if (options.period_ns < 1'000'000) {
    return InvalidArgument("rail sampler: the period must be at least 1 ms");
  }
  std::unique_ptr<RailSampler> s(new RailSampler(std::move(ports), std::move(options)));
  bool any_rdma = false;
  for (const auto& p : s->ports_) {
    s->series_.ports.push_back(p.port);
    s->series_.ports.back().rdma = p.rdma.has_value();
    any_rdma = any_rdma || p.rdma.has_value();
  }
  const size_t n = s->ports_.size();
  const size_t reserve = s->options_.reserve_samples + 2;
  s->series_.t_ns.reserve(reserve);
  s->series_.tick.reserve(reserve);
  s->series_.net.reserve(reserve * n);
  s->has_rdma_ = any_rdma;
  if (any_rdma) s->series_.rdma.reserve(reserve * n);
  s->buf_.resize(kRecvBuf);
  std::promise<void> opened;
  std::future<void> ready = opened.get_future();
  RailSampler* self = s.get();
  s->thread_ = std::thread([self, &opened] {
    // A thread inherits its creator's policy: one started from a realtime thread (the fault
    // agent's) would compete with the fault timing it must never delay. It runs realtime
    // below that (where the process may): at SCHED_OTHER, on a host whose cores are busy
    // (a CI job's compilers beside the agent), 4 of 66 ticks came 5 ms or more off the grid.
    const sched_param normal{};
    pthread_setschedparam(pthread_self(), SCHED_OTHER, &normal);
    RealtimeScope realtime(RealtimeScope::kSamplerPriority);
    self->Open();
    opened.set_value();
    self->Loop();
  });
  ready.wait();
  return s;
}

RailSampler::~RailSampler() {
  Stop();
  for (auto& fds : rdma_fds_) {
    for (int fd : fds) {
      if (fd >= 0) close(fd);
    }
  }
}

void RailSampler::Stop() {
  if (stopped_) return;
  stopped_ = true;
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

std::vector<std::string> RailSampler::errors() const {
  std::vector<std::string> out;
  for (const auto& [what, count] : error_counts_) {
    out.push_back(what + (count > 1 ? " (" + std::to_string(count) + " samples)" : ""));
  }
  return out;
}

void RailSampler::Note(const std::string& what) {
  for (auto& [w, c] : error_counts_) {
    if (w == what) {
      ++c;
      return;
    }
  }
  error_counts_.emplace_back(what, 1);
}

void RailSampler::Open() {
  // Runs on the sampler thread: setns affects it alone, and each socket stays bound to the
  // namespace it was opened in after the thread returns to its own.
  for (size_t i = 0; i < ports_.size(); ++i) {
    Namespace* ns = nullptr;
    for (auto& existing : namespaces_) {
      if (existing->name == ports_[i].netns) ns = existing.get();
    }
    if (ns == nullptr) {
      namespaces_.push_back(std::make_unique<Namespace>());
      ns = namespaces_.back().get();
      ns->name = ports_[i].netns;
      Status st = OpenIn(ns->name, &ns->fd);
      if (!st.ok()) {
        Note("rtnetlink socket in " + (ns->name.empty() ? "the runner's namespace" : ns->name) +
             ": " + st.ToString());
      }
    }
    ns->ports.push_back(i);
  }
  for (auto& fds : rdma_fds_) fds.assign(ports_.size(), -1);
  for (size_t i = 0; i < ports_.size(); ++i) {
    if (!ports_[i].rdma) continue;
    const RdmaPortRef& r = *ports_[i].rdma;
    const std::string base =
        options_.sysfs_root + "/" + r.device + "/ports/" + std::to_string(r.port) + "/counters/";
    const char* names[2] = {"port_xmit_data", "port_rcv_data"};
    for (int d = 0; d < 2; ++d) {
      const std::string path = base + names[d];
      rdma_fds_[d][i] = open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (rdma_fds_[d][i] < 0) Note(ErrnoStatus("open " + path, errno).ToString());
    }
  }
}

void RailSampler::Loop() {
  const int64_t start = options_.start_at_ns > 0 ? options_.start_at_ns : MonoNow();
  const int64_t period = options_.period_ns;
  int64_t tick = 0;
  while (true) {
    if (!SleepUntil(start + tick * period, &stop_)) break;
    SampleOnce(tick);
    ++tick;
    // Fell behind (a stalled machine): skip the missed ticks rather than burst.
    const int64_t now = MonoNow();
    if (start + tick * period < now) tick = (now - start) / period + 1;
  }
  // The last sample, at the stop (the ranks have exited), if sampling had begun and the
  // interval is long enough to give a rate worth reading; its tick is the nearest, which lies
  // past the last one's (it is at least half a period later).
  const int64_t now = MonoNow();
  if (!series_.t_ns.empty() && now - series_.t_ns.back() >= period / 2) {
    SampleOnce(std::max((now - start + period / 2) / period, series_.tick.back() + 1));
  }
}

void RailSampler::SampleOnce(int64_t tick) {
  const size_t n = ports_.size();
  const size_t row = series_.net.size();
  series_.t_ns.push_back(MonoNow());
  series_.tick.push_back(tick);
  for (size_t p = 0; p < n; ++p) series_.net.push_back(RailCounters{});
  for (auto& ns : namespaces_) {
    if (!ns->fd.valid()) continue;
    struct {
      nlmsghdr h;
      ifinfomsg i;
    } req{};
    req.h.nlmsg_len = sizeof(req);
    req.h.nlmsg_type = RTM_GETLINK;
    req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    req.h.nlmsg_seq = ++ns->seq;
    req.i.ifi_family = AF_UNSPEC;
    if (send(ns->fd.get(), &req, sizeof(req), 0) != static_cast<ssize_t>(sizeof(req))) {
      Note("RTM_GETLINK in " + ns->name + ": send failed");
      continue;
    }
    bool done = false;
    while (!done) {
      ssize_t len = recv(ns->fd.get(), buf_.data(), buf_.size(), 0);
      if (len < 0) {
        if (errno == EINTR) continue;
        Note("RTM_GETLINK in " + ns->name + ": no reply (" + std::strerror(errno) + ")");
        break;
      }
      for (auto* h = reinterpret_cast<nlmsghdr*>(buf_.data()); NLMSG_OK(h, len);
           h = NLMSG_NEXT(h, len)) {
        if (h->nlmsg_seq != ns->seq) continue;  // a late reply to an earlier dump
        if (h->nlmsg_type == NLMSG_DONE) {
          done = true;
          break;
        }
        if (h->nlmsg_type == NLMSG_ERROR) {
          Note("RTM_GETLINK in " + ns->name + ": the kernel answered an error");
          done = true;
          break;
        }
        if (h->nlmsg_type != RTM_NEWLINK) continue;
        auto* ifi = static_cast<ifinfomsg*>(NLMSG_DATA(h));
        int alen = static_cast<int>(IFLA_PAYLOAD(h));
        const char* name = nullptr;
        const rtattr* stats = nullptr;
        for (auto* a = IFLA_RTA(ifi); RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
          if (a->rta_type == IFLA_IFNAME) name = static_cast<const char*>(RTA_DATA(a));
          if (a->rta_type == IFLA_STATS64) stats = a;
        }
        if (name == nullptr || stats == nullptr) continue;
        if (RTA_PAYLOAD(stats) < offsetof(rtnl_link_stats64, rx_errors)) continue;
        for (size_t p : ns->ports) {
          if (std::strcmp(ports_[p].dev.c_str(), name) != 0) continue;
          rtnl_link_stats64 st{};
          std::memcpy(&st, RTA_DATA(stats), std::min<size_t>(RTA_PAYLOAD(stats), sizeof(st)));
          series_.net[row + p] = RailCounters{st.tx_bytes, st.rx_bytes, true};
        }
      }
    }
  }
  // The sample's time is taken before the reads: a thread preempted between the two would
  // pair old times with new counters (measured under load: one interval at 2.5x the rail's
  // rate, the next at ~0). Such a sample is left out rather than misread.
  const bool late = MonoNow() - series_.t_ns.back() > kMaxReadSpreadNs;
  if (late) {
    for (size_t p = 0; p < n; ++p) series_.net[row + p].valid = false;
    ++late_samples_;
  }
  for (size_t p = 0; p < n && !late; ++p) {
    if (!series_.net[row + p].valid) {
      bool ns_ok = false;
      for (auto& ns : namespaces_) {
        for (size_t q : ns->ports) {
          if (q == p) ns_ok = ns->fd.valid();
        }
      }
      // A missing socket was noted once at start; a port gone from a working dump is noted.
      if (ns_ok) Note("port " + ports_[p].dev + " in " + ports_[p].netns + " not in the dump");
    }
  }
  if (has_rdma_) {
    char text[32];
    for (size_t p = 0; p < n; ++p) {
      RailCounters c;
      if (ports_[p].rdma && rdma_fds_[0][p] >= 0 && rdma_fds_[1][p] >= 0) {
        uint64_t x = 0, r = 0;
        if (ReadCounter(rdma_fds_[0][p], text, sizeof(text), &x) &&
            ReadCounter(rdma_fds_[1][p], text, sizeof(text), &r)) {
          c = RailCounters{x * 4, r * 4, !late};  // 4-byte units
        } else {
          Note("RDMA counters of " + ports_[p].rdma->device + " unreadable");
        }
      }
      series_.rdma.push_back(c);
    }
  }
}

}  // namespace faultline::runner
