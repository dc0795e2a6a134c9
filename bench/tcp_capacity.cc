// tcp-capacity: the raw capacity of the loopback TCP path the collective benchmarks run on.
//
// Two processes, a sender and a receiver, move bytes for a few seconds over
//  1. one TCP stream (127.0.1.1 -> 127.0.1.2), then
//  2. R parallel streams, stream r over its own address pair 127.0.(r+1).1 -> 127.0.(r+1).2,
//     one thread per stream on each side,
// and the receiver reports bytes / (last byte - first byte). Sockets get the same buffer size
// ftccl asks for by default (4 MiB, SO_SNDBUF/SO_RCVBUF; 0 leaves the kernel's autotuning).
// This is the ceiling ftccl's busbw is read against: a ring collective moves busbw bytes per
// second through each rank's send and receive path.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
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

namespace faultline::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

struct CapacityOptions {
  int rails = 2;
  double seconds = 3;
  size_t write_bytes = 1 << 20;
  int socket_buffer = 4 << 20;
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
  if (fd < 0) return Status::Error(Errno("socket"));
  SetBuffers(fd, socket_buffer);
  sockaddr_in a = Addr(ip, 0);
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 4) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    Status st = Status::Error(Errno(("listen on " + ip).c_str()));
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

// Runs `streams` streams (stream r on rail r) between a forked sender and receiver.
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
  int result_pipe[2];
  if (pipe2(result_pipe, O_CLOEXEC) != 0) {
    close_all();
    return Status::Error(Errno("pipe"));
  }
  std::fflush(stdout);
  const pid_t receiver = fork();
  if (receiver == 0) {
    close(result_pipe[0]);
    std::vector<StreamResult> results(streams);
    std::vector<std::thread> threads;
    for (int r = 0; r < streams; ++r)
      threads.emplace_back(ReceiveStream, listen_fds[r], &results[r]);
    for (auto& t : threads) t.join();
    _exit(WriteAll(result_pipe[1], results.data(), sizeof(StreamResult) * results.size()) ? 0 : 1);
  }
  close(result_pipe[1]);
  if (receiver < 0) {
    close(result_pipe[0]);
    close_all();
    return Status::Error(Errno("fork"));
  }
  const int64_t deadline = NowNs() + static_cast<int64_t>(o.seconds * 1e9);
  const pid_t sender = fork();
  if (sender == 0) {
    close(result_pipe[0]);
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
    _exit(rc);
  }
  close_all();
  Status st = Status::Ok();
  if (sender < 0) {
    st = Status::Error(Errno("fork"));
    kill(receiver, SIGKILL);
  }
  std::vector<StreamResult> results(streams);
  const bool got = ReadAll(result_pipe[0], results.data(), sizeof(StreamResult) * results.size());
  close(result_pipe[0]);
  int status = 0;
  if (sender > 0) {
    waitpid(sender, &status, 0);
    if (st.ok() && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      st = Status::Error("the sender failed");
    }
  }
  waitpid(receiver, &status, 0);
  if (!st.ok()) return st;
  if (!got) return Status::Error("the receiver reported nothing");
  int64_t first = INT64_MAX, last = 0;
  uint64_t total = 0;
  out->streams = streams;
  out->per_stream.clear();
  for (const StreamResult& r : results) {
    if (r.error[0] != '\0') return Status::Error(std::string("receiver: ") + r.error);
    if (r.bytes == 0) return Status::Error("a stream carried no data");
    first = std::min(first, r.first_ns);
    last = std::max(last, r.last_ns);
    total += r.bytes;
    const double span = static_cast<double>(std::max<int64_t>(1, r.last_ns - r.first_ns));
    out->per_stream.push_back(static_cast<double>(r.bytes) / span);
  }
  out->gbps = static_cast<double>(total) / static_cast<double>(std::max<int64_t>(1, last - first));
  return Status::Ok();
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
      "socket buffers %d B, 1 sender and 1 receiver process\n",
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
