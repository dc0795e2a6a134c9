// tcp-capacity: the raw capacity of the loopback TCP path the collective benchmarks run on.
//
// Two processes, a sender and a receiver, move bytes for a few seconds over
//  1. one TCP stream (127.0.1.1 -> 127.0.1.2), then
//  2. R parallel streams, stream r over its own address pair 127.0.(r+1).1 -> 127.0.(r+1).2,
//     one thread per stream on each side,
// and the receiver reports bytes / (last byte - first byte). Then
//  3. a ring of N processes (--ring, default 4) that each send to the next over every rail
//     while receiving from the previous one: the ceiling of a ring collective's busbw here. Sockets
//     get the same buffer size
// ftccl asks for by default (4 MiB, SO_SNDBUF/SO_RCVBUF; 0 leaves the kernel's autotuning).
// This is the ceiling ftccl's busbw is read against: a ring collective moves busbw bytes per
// second through each rank's send and receive path.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "perf_common.h"
#include "runner/exec/launcher.h"

namespace faultline::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

struct CapacityOptions {
  int rails = 2;
  double seconds = 3;
  size_t write_bytes = 1 << 20;
  int socket_buffer = 4 << 20;
  int ring = 4;  // processes of the ring measurement; 0 skips it
  std::string json_path;
};

struct StreamResult {
  uint64_t bytes = 0;
  int64_t first_ns = 0;  // steady clock, shared by the processes of this host
  int64_t last_ns = 0;
  char error[128] = {};
};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch())
      .count();
}

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

sockaddr_in Addr(const std::string& ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  return a;
}

void SetBuffers(int fd, int bytes) {
  if (bytes <= 0) return;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
}

// A listening socket on ip:0 (buffers set before listen so accepted sockets inherit them).
Status Listen(const std::string& ip, int socket_buffer, int* fd_out, uint16_t* port_out) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Internal(Errno("socket"));
  SetBuffers(fd, socket_buffer);
  sockaddr_in a = Addr(ip, 0);
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 4) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    Status st = Internal(Errno(("listen on " + ip).c_str()));
    close(fd);
    return st;
  }
  *fd_out = fd;
  *port_out = ntohs(a.sin_port);
  return Status::Ok();
}

void ReceiveStream(int listen_fd, StreamResult* out) {
  const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) {
    std::snprintf(out->error, sizeof(out->error), "%s", Errno("accept").c_str());
    return;
  }
  std::vector<char> buf(4 << 20);
  for (;;) {
    const ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      std::snprintf(out->error, sizeof(out->error), "%s", Errno("read").c_str());
      break;
    }
    if (n == 0) break;
    const int64_t now = NowNs();
    if (out->bytes == 0) out->first_ns = now;
    out->last_ns = now;
    out->bytes += static_cast<uint64_t>(n);
  }
  close(fd);
}

void SendStream(const std::string& from, const std::string& to, uint16_t port,
                const CapacityOptions& o, int64_t deadline_ns, std::string* error) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = Errno("socket");
    return;
  }
  SetBuffers(fd, o.socket_buffer);
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sockaddr_in src = Addr(from, 0);
  sockaddr_in dst = Addr(to, port);
  if (bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof(src)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof(dst)) != 0) {
    *error = Errno(("connect " + from + " -> " + to).c_str());
    close(fd);
    return;
  }
  std::vector<char> buf(o.write_bytes, 'x');
  while (NowNs() < deadline_ns) {
    size_t off = 0;
    while (off < buf.size()) {
      const ssize_t n = write(fd, buf.data() + off, buf.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        *error = Errno("write");
        close(fd);
        return;
      }
      off += static_cast<size_t>(n);
    }
  }
  shutdown(fd, SHUT_WR);
  close(fd);
}

bool WriteAll(int fd, const void* data, size_t len) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    const ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

bool ReadAll(int fd, void* data, size_t len) {
  char* p = static_cast<char*>(data);
  while (len > 0) {
    const ssize_t n = read(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

struct Measurement {
  int streams = 0;
  double gbps = 0;                 // aggregate, 1e9 bytes per second
  std::vector<double> per_stream;  // each stream over its own active time
};

// Runs `streams` streams (stream r on rail r) between a sender and a receiver process (fork
// launches of runner::LocalNetnsLauncher; the receiver reports over its channel).
Status Measure(const CapacityOptions& o, int streams, Measurement* out) {
  std::vector<int> listen_fds;
  std::vector<uint16_t> ports;
  auto close_all = [&] {
    for (int fd : listen_fds) close(fd);
  };
  for (int r = 0; r < streams; ++r) {
    int fd = -1;
    uint16_t port = 0;
    Status st = Listen("127.0." + std::to_string(r + 1) + ".2", o.socket_buffer, &fd, &port);
    if (!st.ok()) {
      close_all();
      return st;
    }
    listen_fds.push_back(fd);
    ports.push_back(port);
  }
  auto launcher = runner::LocalNetnsLauncher::Create({""}, "");
  if (!launcher.ok()) {
    close_all();
    return Internal(launcher.status().ToString());
  }
  runner::Launcher& l = **launcher;
  const int64_t deadline = NowNs() + static_cast<int64_t>(o.seconds * 1e9);
  // Rank 0 receives and reports over its channel; rank 1 sends.
  std::vector<runner::LaunchSpec> pair(2);
  pair[0].placement.global_rank = 0;
  pair[0].body = [&](int channel_fd) {
    std::vector<StreamResult> results(streams);
    std::vector<std::thread> threads;
    for (int r = 0; r < streams; ++r)
      threads.emplace_back(ReceiveStream, listen_fds[r], &results[r]);
    for (auto& t : threads) t.join();
    return WriteAll(channel_fd, results.data(), sizeof(StreamResult) * results.size()) ? 0 : 1;
  };
  pair[1].placement.global_rank = 1;
  pair[1].body = [&](int /*channel_fd*/) {
    std::vector<std::string> errors(streams);
    std::vector<std::thread> threads;
    for (int r = 0; r < streams; ++r) {
      const std::string base = "127.0." + std::to_string(r + 1) + ".";
      threads.emplace_back(SendStream, base + "1", base + "2", ports[r], std::cref(o), deadline,
                           &errors[r]);
    }
    for (auto& t : threads) t.join();
    int rc = 0;
    for (const auto& e : errors) {
      if (!e.empty()) {
        std::fprintf(stderr, "tcp-capacity: sender: %s\n", e.c_str());
        rc = 1;
      }
    }
    return rc;
  };
  auto handles = l.StartWorld(pair);
  close_all();
  if (!handles.ok()) return Internal(handles.status().ToString());
  std::vector<StreamResult> results(streams);
  const bool got = ReadAll(l.ChannelFd(0), results.data(), sizeof(StreamResult) * results.size());
  Status st = Status::Ok();
  auto sender = l.Wait(1, INT64_MAX);
  if (!sender.ok() || !sender->success()) st = Internal("the sender failed");
  l.Wait(0, INT64_MAX).status().IgnoreError();
  if (!st.ok()) return st;
  if (!got) return Internal("the receiver reported nothing");
  int64_t first = INT64_MAX, last = 0;
  uint64_t total = 0;
  out->streams = streams;
  out->per_stream.clear();
  for (const StreamResult& r : results) {
    if (r.error[0] != '\0') return Internal(std::string("receiver: ") + r.error);
    if (r.bytes == 0) return Internal("a stream carried no data");
    first = std::min(first, r.first_ns);
    last = std::max(last, r.last_ns);
    total += r.bytes;
    const double span = static_cast<double>(std::max<int64_t>(1, r.last_ns - r.first_ns));
    out->per_stream.push_back(static_cast<double>(r.bytes) / span);
  }
  out->gbps = static_cast<double>(total) / static_cast<double>(std::max<int64_t>(1, last - first));
  return Status::Ok();
}

// N processes in a ring, each sending to the next and receiving from the previous one at once
// over every rail (process i, rail r: 127.0.(r+1).(i+1)): the pattern of a ring collective, so
// the per-process receive rate is the ceiling of a ring collective's busbw on this machine.
Status MeasureRing(const CapacityOptions& o, std::vector<double>* per_rank) {
  const int n = o.ring;
  const int rails = o.rails;
  std::vector<int> listen_fds;  // [i * rails + r]
  std::vector<uint16_t> ports;
  auto close_all = [&] {
    for (int fd : listen_fds) close(fd);
  };
  auto ip = [](int proc, int rail) {
    return "127.0." + std::to_string(rail + 1) + "." + std::to_string(proc + 1);
  };
  for (int i = 0; i < n; ++i) {
    for (int r = 0; r < rails; ++r) {
      int fd = -1;
      uint16_t port = 0;
      Status st = Listen(ip(i, r), o.socket_buffer, &fd, &port);
      if (!st.ok()) {
        close_all();
        return st;
      }
      listen_fds.push_back(fd);
      ports.push_back(port);
    }
  }
  auto launcher = runner::LocalNetnsLauncher::Create({""}, "");
  if (!launcher.ok()) {
    close_all();
    return Internal(launcher.status().ToString());
  }
  runner::Launcher& l = **launcher;
  const int64_t deadline = NowNs() + static_cast<int64_t>(o.seconds * 1e9);
  std::vector<runner::LaunchSpec> world(n);
  for (int i = 0; i < n; ++i) {
    world[i].placement.global_rank = i;
    world[i].body = [&, i](int channel_fd) {
      std::vector<StreamResult> results(rails);
      std::vector<std::string> errors(rails);
      std::vector<std::thread> threads;
      const int next = (i + 1) % n;
      for (int r = 0; r < rails; ++r) {
        threads.emplace_back(ReceiveStream, listen_fds[i * rails + r], &results[r]);
        threads.emplace_back(SendStream, ip(i, r), ip(next, r), ports[next * rails + r],
                             std::cref(o), deadline, &errors[r]);
      }
      for (auto& t : threads) t.join();
      for (int r = 0; r < rails; ++r) {
        if (!errors[r].empty() && results[r].error[0] == '\0') {
          std::snprintf(results[r].error, sizeof(results[r].error), "%s", errors[r].c_str());
        }
      }
      return WriteAll(channel_fd, results.data(), sizeof(StreamResult) * results.size()) ? 0 : 1;
    };
  }
  auto handles = l.StartWorld(world);
  close_all();
  if (!handles.ok()) return Internal(handles.status().ToString());
  Status st = Status::Ok();
  per_rank->clear();
  for (int h : *handles) {
    const size_t i = static_cast<size_t>(h);
    std::vector<StreamResult> results(rails);
    const bool got = ReadAll(l.ChannelFd(h), results.data(), sizeof(StreamResult) * results.size());
    if (!st.ok()) continue;
    if (!got) {
      st = Internal("ring process " + std::to_string(i) + " reported nothing");
      continue;
    }
    int64_t first = INT64_MAX, last = 0;
    uint64_t total = 0;
    for (const StreamResult& r : results) {
      if (r.error[0] != '\0')
        st = Internal("ring process " + std::to_string(i) + ": " + r.error);
      if (r.bytes == 0) continue;
      first = std::min(first, r.first_ns);
      last = std::max(last, r.last_ns);
      total += r.bytes;
    }
    per_rank->push_back(total == 0 ? 0.0
                                   : static_cast<double>(total) /
                                         static_cast<double>(std::max<int64_t>(1, last - first)));
  }
  if (!st.ok()) {
    for (int h : *handles) l.Kill(h, SIGKILL).IgnoreError();
  }
  l.WaitAll(INT64_MAX);
  return st;
}

int Main(int argc, char** argv) {
  CapacityOptions o;
  CLI::App app(
      "tcp-capacity: raw loopback TCP capacity between two processes, over one stream and over "
      "R streams on R loopback address pairs (127.0.(r+1).1 -> 127.0.(r+1).2)");
  app.add_option("--rails", o.rails, "parallel streams, one per rail")
      ->capture_default_str()
      ->check(CLI::Range(1, 254));
  app.add_option("--seconds", o.seconds, "duration of each measurement")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 600.0));
  app.add_option("--write-bytes", o.write_bytes, "bytes per write()")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1} << 30));
  app.add_option("--socket-buffer", o.socket_buffer,
                 "SO_SNDBUF/SO_RCVBUF bytes (ftccl's default); 0: kernel autotuning")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--ring", o.ring,
                 "processes of the ring measurement (each sends to the next over every rail "
                 "while receiving from the previous one); 0 skips it")
      ->capture_default_str()
      ->check(CLI::Range(0, 254));
  app.add_option("-J,--json", o.json_path, "also write the figures as JSON to this file");
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  std::printf(
      "# tcp-capacity: loopback TCP, %.1f s per measurement, %zu-byte writes, "
      "socket buffers %d B; every endpoint is its own process\n",
      o.seconds, o.write_bytes, o.socket_buffer);
  std::vector<int> counts{1};
  if (o.rails > 1) counts.push_back(o.rails);
  nlohmann::json j;
  j["schema"] = "faultline.tcp_capacity/v1";
  j["seconds"] = o.seconds;
  j["write_bytes"] = o.write_bytes;
  j["socket_buffer"] = o.socket_buffer;
  j["measurements"] = nlohmann::json::array();
  for (int streams : counts) {
    Measurement m;
    Status st = Measure(o, streams, &m);
    if (!st.ok()) {
      std::fprintf(stderr, "tcp-capacity: %d stream(s): %s\n", streams, st.message().c_str());
      return 3;
    }
    std::printf("%-10s %2d stream%s: %8.3f GB/s", streams == 1 ? "single" : "rails", streams,
                streams == 1 ? " " : "s", m.gbps);
    if (streams > 1) {
      std::printf("  (per stream:");
      for (double g : m.per_stream) std::printf(" %.3f", g);
      std::printf(")");
    }
    std::printf("\n");
    std::fflush(stdout);
    j["measurements"].push_back(
        {{"streams", streams}, {"gbps", m.gbps}, {"per_stream_gbps", m.per_stream}});
  }
  if (o.ring >= 2) {
    std::vector<double> per_rank;
    Status st = MeasureRing(o, &per_rank);
    if (!st.ok()) {
      std::fprintf(stderr, "tcp-capacity: ring of %d: %s\n", o.ring, st.message().c_str());
      return 3;
    }
    double sum = 0, lo = per_rank.empty() ? 0 : per_rank[0];
    for (double g : per_rank) {
      sum += g;
      lo = std::min(lo, g);
    }
    const double mean = per_rank.empty() ? 0 : sum / static_cast<double>(per_rank.size());
    std::printf(
        "ring       %2d procs  : %8.3f GB/s per process (min %.3f) over %d rail%s: the "
        "busbw ceiling of a ring collective\n",
        o.ring, mean, lo, o.rails, o.rails == 1 ? "" : "s");
    std::fflush(stdout);
    j["ring"] = {{"processes", o.ring},
                 {"rails", o.rails},
                 {"mean_gbps", mean},
                 {"min_gbps", lo},
                 {"per_process_gbps", per_rank}};
  }
  if (!o.json_path.empty()) {
    std::ofstream f(o.json_path);
    f << j.dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "tcp-capacity: cannot write %s\n", o.json_path.c_str());
      return 3;
    }
  }
  return 0;
}

}  // namespace
}  // namespace faultline::bench

int main(int argc, char** argv) { return faultline::bench::Main(argc, argv); }
