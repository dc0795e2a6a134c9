#include "bootstrap.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

#include "log.h"

namespace ftccl {
namespace {

constexpr uint32_t kBootMagic = 0x54424C46;  // "FLBT"
enum MsgType : uint32_t { kHello = 1, kTable = 2, kReady = 3, kError = 4, kGo = 5 };
constexpr uint32_t kMaxMsg = 16u << 20;
constexpr auto kExplainGrace = std::chrono::milliseconds(1000);

struct Writer {
  std::string buf;
  template <typename T>
  void Put(T v) {
    buf.append(reinterpret_cast<const char*>(&v), sizeof(v));
  }
};

struct Reader {
  const std::string& buf;
  size_t pos = 0;
  template <typename T>
  bool Get(T* v) {
    if (pos + sizeof(T) > buf.size()) return false;
    std::memcpy(v, buf.data() + pos, sizeof(T));
    pos += sizeof(T);
    return true;
  }
};

Status SendMsg(int fd, uint32_t type, const std::string& payload, Clock::time_point deadline) {
  uint32_t head[2] = {type, static_cast<uint32_t>(payload.size())};
  FTCCL_RETURN_IF_ERROR(net::WriteFull(fd, head, sizeof(head), deadline));
  if (!payload.empty())
    FTCCL_RETURN_IF_ERROR(net::WriteFull(fd, payload.data(), payload.size(), deadline));
  return Status::Ok();
}

Status RecvMsg(int fd, uint32_t* type, std::string* payload, Clock::time_point deadline) {
  uint32_t head[2];
  FTCCL_RETURN_IF_ERROR(net::ReadFull(fd, head, sizeof(head), deadline));
  if (head[1] > kMaxMsg)
    return Corrupt("bootstrap message of " + std::to_string(head[1]) + " bytes");
  *type = head[0];
  payload->assign(head[1], '\0');
  if (head[1] > 0) FTCCL_RETURN_IF_ERROR(net::ReadFull(fd, payload->data(), head[1], deadline));
  return Status::Ok();
}

uint64_t NewCommId() {
  std::random_device rd;
  uint64_t id = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
                static_cast<uint64_t>(Clock::now().time_since_epoch().count()) ^
                (static_cast<uint64_t>(getpid()) << 16);
  return id == 0 ? 1 : id;
}

}  // namespace

uint64_t LocalHostKey() {
  std::string id;
  if (const char* e = std::getenv("FTCCL_HOST_ID"); e != nullptr && *e != '\0') {
    id = e;
  } else {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    struct stat st {};
    // Abstract Unix sockets are scoped by network namespace: a host is a namespace here.
    if (stat("/proc/self/ns/net", &st) == 0) {
      id = std::string(name) + "/" + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
    } else {
      id = name;
    }
  }
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : id) h = (h ^ c) * 1099511628211ull;
  return h;
}

Result<std::unique_ptr<Bootstrap>> Bootstrap::Join(const CommOptions& options,
                                                   const std::vector<net::Endpoint>& my_rails,
                                                   const GroupKey& group,
                                                   Clock::time_point deadline) {
  std::unique_ptr<Bootstrap> b(new Bootstrap(options.rank));
  const bool joiner = group.joiner_key != 0 && options.rank >= group.first_joiner;
  Status st = options.rank == 0
                  ? b->JoinAsRoot(options, my_rails, group, deadline)
                  : b->JoinAsPeer(options, my_rails, joiner ? group.joiner_key : group.key,
                                  deadline);
  if (!st.ok()) return st.WithContext("bootstrap (rank " + std::to_string(options.rank) + ")");
  return b;
}

Status Bootstrap::OpenSpare(uint32_t ip) {
  auto l = net::Listen(ip, 0);
  if (!l.ok()) return l.status().WithContext("opening the listener for a later shrink or grow");
  spare_ = std::move(l->first);
  table_.spares[rank_] = l->second;
  return Status::Ok();
}

Status Bootstrap::JoinAsRoot(const CommOptions& options, const std::vector<net::Endpoint>& my_rails,
                             const GroupKey& group, Clock::time_point deadline) {
  const uint64_t group_key = group.key;
  const bool grow = group.joiner_key != 0;
  net::Fd listener;
  if (options.bootstrap_listen_fd >= 0) {
    listener = net::Fd(dup(options.bootstrap_listen_fd));
    if (!listener.valid()) return ErrnoStatus("dup(bootstrap_listen_fd)", errno);
  } else {
    auto ep = net::ParseEndpoint(options.bootstrap);
    if (!ep.ok()) return ep.status();
    auto l = net::Listen(ep->ip, ep->port);
    if (!l.ok()) return l.status();
    listener = std::move(l->first);
  }
  const int size = options.size;
  const int nrails = static_cast<int>(my_rails.size());
  table_.size = size;
  table_.num_rails = nrails;
  table_.comm_id = NewCommId();
  table_.rails.assign(size, {});
  table_.rails[0] = my_rails;
  table_.hosts.assign(size, 0);
  table_.hosts[0] = LocalHostKey();
  table_.spares.assign(size, {});
  peers_.resize(size);
  int joined = 1;
  std::string error;
  while (joined < size) {
    auto conn = net::Accept(listener.get(), deadline);
    if (!conn.ok() && conn.status().code() != Code::kTimeout) {
      BroadcastError(conn.status().message(), Clock::now() + std::chrono::seconds(1),
                     conn.status().code());
      return conn.status().WithContext("accepting ranks on the bootstrap socket");
    }
    if (!conn.ok()) {
      std::string missing;
      for (int r = 1; r < size; ++r) {
        if (!peers_[r].valid()) missing += (missing.empty() ? "" : ",") + std::to_string(r);
      }
      error = "only " + std::to_string(joined) + " of " + std::to_string(size) +
              " ranks joined before the deadline (missing ranks: " + missing + ")";
      BroadcastError(error, Clock::now() + std::chrono::seconds(1), Code::kTimeout);
      return Timeout(error);
    }
    uint32_t type;
    std::string payload;
    Status st = RecvMsg(conn->get(), &type, &payload, deadline);
    if (!st.ok()) {
      LOG_WARN("INIT", "bootstrap: dropping a connection that sent no hello: %s",
               st.ToString().c_str());
      continue;
    }
    Reader rd{payload};
    uint32_t magic = 0;
    int32_t rank = -1, psize = 0, prails = 0, pchannels = 0;
    uint64_t pkey = 0;
    if (type != kHello || !rd.Get(&magic) || magic != kBootMagic || !rd.Get(&pkey) ||
        !rd.Get(&rank) || !rd.Get(&psize) || !rd.Get(&prails) || !rd.Get(&pchannels)) {
      LOG_WARN("INIT", "bootstrap: dropping a connection with a malformed hello");
      continue;
    }
    const bool as_joiner = grow && pkey == group.joiner_key;
    std::string refusal;
    if (pkey != group_key && !as_joiner) {
      // A rank forming another group here: another shrink of the same parent (it excludes
      // other ranks), a joiner with a stale or foreign grow id, or a fresh communicator at a
      // shrink root's address. It is refused; the group being formed is not its business.
      refusal = "rank " + std::to_string(rank) + " asked to join another group than rank 0 forms (" +
                (grow ? std::string("its grow id is stale or belongs to another communicator")
                 : group_key == 0 || pkey == 0 ? std::string("a shrunk communicator and a new one")
                                               : std::string("shrinks excluding different ranks")) +
                ")";
    } else if (grow && as_joiner && (rank < group.first_joiner || rank >= size)) {
      refusal = "a joining process claimed rank " + std::to_string(rank) +
                ", but joiners take ranks " + std::to_string(group.first_joiner) + ".." +
                std::to_string(size - 1) + " (the ranks below are the existing group's)";
    } else if (grow && !as_joiner && rank >= group.first_joiner) {
      refusal = "a member of the existing group claimed rank " + std::to_string(rank) +
                ", which is a joiner's";
    } else if (grow && as_joiner && peers_[rank].valid()) {
      refusal = "rank " + std::to_string(rank) + " has already joined; a second process claimed it";
    }
    if (!refusal.empty()) {
      LOG_WARN("INIT", "bootstrap: refusing %s", refusal.c_str());
      SendMsg(conn->get(), kError,
              std::to_string(static_cast<int>(Code::kInvalidArgument)) + "|" + refusal,
              Clock::now() + std::chrono::seconds(1))
          .ok();
      continue;
    }
    std::string reason;
    if (psize != size) {
      reason = "rank " + std::to_string(rank) + " was started with size " + std::to_string(psize) +
               " but rank 0 with size " + std::to_string(size);
    } else if (rank <= 0 || rank >= size) {
      reason = "a rank joined with rank " + std::to_string(rank) + ", outside [1, " +
               std::to_string(size) + ")";
    } else if (peers_[rank].valid()) {
      reason = "two processes joined as rank " + std::to_string(rank);
    } else if (prails != nrails) {
      reason = "rank " + std::to_string(rank) + " has " + std::to_string(prails) +
               " rails but rank 0 has " + std::to_string(nrails);
    } else if (pchannels != options.channels_per_rail) {
      reason = "rank " + std::to_string(rank) + " uses " + std::to_string(pchannels) +
               " channels per rail but rank 0 uses " + std::to_string(options.channels_per_rail);
    }
    if (!reason.empty()) {
      SendMsg(conn->get(), kError,
              std::to_string(static_cast<int>(Code::kInvalidArgument)) + "|" + reason,
              Clock::now() + std::chrono::seconds(1))
          .ok();
      BroadcastError(reason, Clock::now() + std::chrono::seconds(1), Code::kInvalidArgument);
      return InvalidArgument(reason);
    }
    std::vector<net::Endpoint> rails(nrails);
    for (int i = 0; i < nrails; ++i) {
      uint32_t ip;
      uint16_t port, pad;
      if (!rd.Get(&ip) || !rd.Get(&port) || !rd.Get(&pad)) {
        return Corrupt("truncated hello from rank " + std::to_string(rank));
      }
      rails[i] = net::Endpoint{ip, port};
    }
    uint16_t spare_port = 0, spare_pad = 0;
    if (!rd.Get(&table_.hosts[rank]) || !rd.Get(&table_.spares[rank].ip) ||
        !rd.Get(&spare_port) || !rd.Get(&spare_pad))
      return Corrupt("truncated hello from rank " + std::to_string(rank));
    table_.spares[rank].port = spare_port;
    table_.rails[rank] = std::move(rails);
    peers_[rank] = std::move(conn.value());
    ++joined;
  }
  // The ranks reached this one at the local address of their connections: that is where a
  // later shrink's ranks find it too (the bootstrap listener may be bound to any address).
  auto here = net::LocalEndpoint(peers_[1].get());
  if (!here.ok()) return here.status();
  FTCCL_RETURN_IF_ERROR(OpenSpare(here->ip));
  Writer w;
  w.Put(table_.comm_id);
  w.Put(static_cast<int32_t>(size));
  w.Put(static_cast<int32_t>(nrails));
  for (int r = 0; r < size; ++r) {
    for (const auto& ep : table_.rails[r]) {
      w.Put(ep.ip);
      w.Put(ep.port);
      w.Put(static_cast<uint16_t>(0));
    }
  }
  for (int r = 0; r < size; ++r) w.Put(table_.hosts[r]);
  for (int r = 0; r < size; ++r) {
    w.Put(table_.spares[r].ip);
    w.Put(table_.spares[r].port);
    w.Put(static_cast<uint16_t>(0));
  }
  for (int r = 1; r < size; ++r) {
    Status st = SendMsg(peers_[r].get(), kTable, w.buf, deadline);
    if (!st.ok()) return st.WithContext("sending the address table to rank " + std::to_string(r));
  }
  return Status::Ok();
}

Status Bootstrap::JoinAsPeer(const CommOptions& options, const std::vector<net::Endpoint>& my_rails,
                             uint64_t group_key, Clock::time_point deadline) {
  auto ep = net::ParseEndpoint(options.bootstrap);
  if (!ep.ok()) return ep.status();
  Status last;
  for (;;) {
    auto c = net::Connect(*ep, 0, deadline);
    if (c.ok()) {
      root_ = std::move(c.value());
      break;
    }
    last = c.status();
    if (group_key != 0 &&
        last.message().find("(errno " + std::to_string(ECONNREFUSED) + ")") != std::string::npos) {
      // A shrink's root listens from its communicator's creation until it is destroyed:
      // refused means it is gone, or formed its group without this rank and moved on.
      return NetworkError("the new rank 0 at " + ep->ToString() +
                          " no longer listens (it is gone, or did not admit this rank): " +
                          last.message());
    }
    if (Clock::now() + std::chrono::milliseconds(50) >= deadline) {
      return NetworkError("cannot reach rank 0 at " + ep->ToString() +
                          " before the deadline: " + last.message());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // The spare listener goes where this rank reached rank 0 from: its management address.
  table_.spares.assign(options.size, {});
  auto here = net::LocalEndpoint(root_.get());
  if (!here.ok()) return here.status();
  FTCCL_RETURN_IF_ERROR(OpenSpare(here->ip));
  Writer w;
  w.Put(kBootMagic);
  w.Put(group_key);
  w.Put(static_cast<int32_t>(options.rank));
  w.Put(static_cast<int32_t>(options.size));
  w.Put(static_cast<int32_t>(my_rails.size()));
  w.Put(static_cast<int32_t>(options.channels_per_rail));
  for (const auto& r : my_rails) {
    w.Put(r.ip);
    w.Put(r.port);
    w.Put(static_cast<uint16_t>(0));
  }
  w.Put(LocalHostKey());
  w.Put(table_.spares[options.rank].ip);
  w.Put(table_.spares[options.rank].port);
  w.Put(static_cast<uint16_t>(0));
  FTCCL_RETURN_IF_ERROR(SendMsg(root_.get(), kHello, w.buf, deadline));
  uint32_t type;
  std::string payload;
  // Rank 0 gives up at the same deadline and then says why (which ranks did not come): its
  // word is worth a moment's wait.
  Status st = RecvMsg(root_.get(), &type, &payload, deadline + kExplainGrace);
  if (!st.ok() && group_key != 0) {
    // A shrink's root that formed its group without this rank closes its listener with this
    // rank's connection still unanswered.
    return st.WithContext(
        "waiting for the address table from rank 0 of the new group (it did not admit this "
        "rank: it formed its group without it, or is gone)");
  }
  if (!st.ok()) return st.WithContext("waiting for the address table from rank 0");
  if (type == kError) {
    // "<code>|<text>": the cause keeps its code (a missing rank is a timeout, a bad option an
    // invalid argument).
    Code code = Code::kInvalidArgument;
    auto bar = payload.find('|');
    if (bar != std::string::npos) {
      int c = std::atoi(payload.substr(0, bar).c_str());
      if (c > 0 && c <= static_cast<int>(Code::kInternal)) code = static_cast<Code>(c);
      payload = payload.substr(bar + 1);
    }
    return Status(code, "rank 0 refused the group: " + payload);
  }
  if (type != kTable) return Corrupt("unexpected bootstrap message type " + std::to_string(type));
  Reader rd{payload};
  int32_t size = 0, nrails = 0;
  if (!rd.Get(&table_.comm_id) || !rd.Get(&size) || !rd.Get(&nrails) || size != options.size ||
      nrails != static_cast<int32_t>(my_rails.size())) {
    return Corrupt("malformed address table from rank 0");
  }
  table_.size = size;
  table_.num_rails = nrails;
  table_.rails.assign(size, std::vector<net::Endpoint>(nrails));
  for (int r = 0; r < size; ++r) {
    for (int i = 0; i < nrails; ++i) {
      uint16_t pad;
      if (!rd.Get(&table_.rails[r][i].ip) || !rd.Get(&table_.rails[r][i].port) || !rd.Get(&pad)) {
        return Corrupt("truncated address table from rank 0");
      }
    }
  }
  table_.hosts.assign(size, 0);
  for (int r = 0; r < size; ++r) {
    if (!rd.Get(&table_.hosts[r])) return Corrupt("truncated address table from rank 0");
  }
  net::Endpoint mine = table_.spares[options.rank];
  for (int r = 0; r < size; ++r) {
    uint16_t pad;
    if (!rd.Get(&table_.spares[r].ip) || !rd.Get(&table_.spares[r].port) || !rd.Get(&pad)) {
      return Corrupt("truncated address table from rank 0");
    }
  }
  if (table_.spares[options.rank].ip != mine.ip || table_.spares[options.rank].port != mine.port) {
    return Corrupt("the address table from rank 0 does not list this rank's own listener");
  }
  return Status::Ok();
}

void Bootstrap::BroadcastError(const std::string& text, Clock::time_point deadline, Code code) {
  for (auto& p : peers_) {
    if (p.valid())
      SendMsg(p.get(), kError, std::to_string(static_cast<int>(code)) + "|" + text, deadline).ok();
  }
}

Status Bootstrap::Ready(const Status& local, Clock::time_point deadline) {
  if (rank_ != 0) {
    if (local.ok()) {
      FTCCL_RETURN_IF_ERROR(SendMsg(root_.get(), kReady, "", deadline));
    } else {
      SendMsg(root_.get(), kError, "rank " + std::to_string(rank_) + ": " + local.ToString(),
              deadline)
          .ok();
    }
    uint32_t type;
    std::string payload;
    Status st = RecvMsg(root_.get(), &type, &payload, deadline);
    if (!local.ok()) return local;
    if (!st.ok()) return st.WithContext("bootstrap: waiting for rank 0 to confirm setup");
    if (type == kGo) return Status::Ok();
    auto bar = payload.find('|');
    if (bar != std::string::npos) payload = payload.substr(bar + 1);
    return NetworkError("setup failed on another rank: " + payload);
  }
  std::string first_error = local.ok() ? "" : "rank 0: " + local.ToString();
  for (size_t r = 1; r < peers_.size(); ++r) {
    uint32_t type;
    std::string payload;
    Status st = RecvMsg(peers_[r].get(), &type, &payload, deadline);
    if (!st.ok() && first_error.empty()) {
      first_error = "rank " + std::to_string(r) + " did not confirm setup: " + st.ToString();
    } else if (st.ok() && type == kError && first_error.empty()) {
      first_error = payload;
    }
  }
  if (first_error.empty()) {
    for (size_t r = 1; r < peers_.size(); ++r) {
      Status st = SendMsg(peers_[r].get(), kGo, "", deadline);
      if (!st.ok())
        return st.WithContext("bootstrap: confirming setup to rank " + std::to_string(r));
    }
    return Status::Ok();
  }
  BroadcastError(first_error, deadline, Code::kNetwork);
  return local.ok() ? NetworkError("setup failed on another rank: " + first_error) : local;
}

}  // namespace ftccl
