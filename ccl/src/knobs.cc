// Knobs: declared once in CommOptions (with their defaults), overridable from the environment.
#include <cerrno>
#include <cstdlib>
#include <string>

#include "ftccl/communicator.h"

namespace ftccl {
namespace {

Status ParseU64(const char* name, uint64_t min, uint64_t max, uint64_t* out) {
  const char* v = std::getenv(name);
  if (v == nullptr) return Status::Ok();
  char* end = nullptr;
  errno = 0;
  unsigned long long x = std::strtoull(v, &end, 10);
  if (*v == '\0' || *end != '\0' || errno != 0 || x < min || x > max) {
    return InvalidArgument(std::string(name) + "='" + v + "': expected an integer in [" +
                           std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  *out = x;
  return Status::Ok();
}

template <typename T>
Status Override(const char* name, uint64_t min, uint64_t max, T* field) {
  uint64_t v = static_cast<uint64_t>(*field);
  FTCCL_RETURN_IF_ERROR(ParseU64(name, min, max, &v));
  *field = static_cast<T>(v);
  return Status::Ok();
}

Status OverrideMs(const char* name, uint64_t min, uint64_t max, Millis* field) {
  uint64_t v = static_cast<uint64_t>(field->count());
  FTCCL_RETURN_IF_ERROR(ParseU64(name, min, max, &v));
  *field = Millis(v);
  return Status::Ok();
}

}  // namespace

Status ApplyEnvOverrides(CommOptions* o) {
  FTCCL_RETURN_IF_ERROR(Override("FTCCL_CHANNELS_PER_RAIL", 1, 64, &o->channels_per_rail));
  FTCCL_RETURN_IF_ERROR(Override("FTCCL_CHUNK_BYTES", 1024, 64ull << 20, &o->chunk_bytes));
  FTCCL_RETURN_IF_ERROR(Override("FTCCL_SLICE_BYTES", 1024, 1ull << 30, &o->slice_bytes));
  FTCCL_RETURN_IF_ERROR(
      Override("FTCCL_SMALL_ALLREDUCE_BYTES", 0, 1ull << 30, &o->small_allreduce_bytes));
  FTCCL_RETURN_IF_ERROR(Override("FTCCL_SOCKET_BUFFER_BYTES", 0, 1ull << 30, &o->socket_buffer_bytes));
  FTCCL_RETURN_IF_ERROR(OverrideMs("FTCCL_INIT_TIMEOUT_MS", 1, 3600000, &o->init_timeout));
  FTCCL_RETURN_IF_ERROR(OverrideMs("FTCCL_INIT_PATH_GRACE_MS", 0, 3600000, &o->init_path_grace));
  FTCCL_RETURN_IF_ERROR(OverrideMs("FTCCL_OP_TIMEOUT_MS", 1, 86400000, &o->op_timeout));
  FTCCL_RETURN_IF_ERROR(OverrideMs("FTCCL_SUSPECT_FLOOR_MS", 1, 3600000, &o->suspect_floor));
  FTCCL_RETURN_IF_ERROR(OverrideMs("FTCCL_SUSPECT_CEILING_MS", 1, 3600000, &o->suspect_ceiling));
  FTCCL_RETURN_IF_ERROR(OverrideMs("FTCCL_HEDGE_FLOOR_MS", 0, 60000, &o->hedge_floor));
  FTCCL_RETURN_IF_ERROR(OverrideMs("FTCCL_HEARTBEAT_INTERVAL_MS", 0, 3600000, &o->heartbeat_interval));
  FTCCL_RETURN_IF_ERROR(OverrideMs("FTCCL_FAILBACK_HOLDDOWN_MS", 0, 3600000, &o->failback_holddown));
  FTCCL_RETURN_IF_ERROR(OverrideMs("FTCCL_FAILBACK_HOLDDOWN_MAX_MS", 0, 3600000, &o->failback_holddown_max));
  FTCCL_RETURN_IF_ERROR(OverrideMs("FTCCL_FLAP_WINDOW_MS", 0, 86400000, &o->flap_window));
  FTCCL_RETURN_IF_ERROR(OverrideMs("FTCCL_PATH_QUEUE_MS", 0, 3600000, &o->path_queue));
  FTCCL_RETURN_IF_ERROR(OverrideMs("FTCCL_RECONNECT_INTERVAL_MS", 1, 3600000, &o->reconnect_interval));
  FTCCL_RETURN_IF_ERROR(OverrideMs("FTCCL_TCP_USER_TIMEOUT_MS", 0, 3600000, &o->tcp_user_timeout));
  if (o->suspect_floor > o->suspect_ceiling) {
    return InvalidArgument("suspect_floor (" + std::to_string(o->suspect_floor.count()) +
                           " ms) exceeds suspect_ceiling (" +
                           std::to_string(o->suspect_ceiling.count()) + " ms)");
  }
  FTCCL_RETURN_IF_ERROR(OverrideMs("FTCCL_ABORT_TIMEOUT_MS", 1, 3600000, &o->abort_timeout));
  FTCCL_RETURN_IF_ERROR(Override("FTCCL_WATCH_LINKS", 0, 1, &o->watch_links));
  FTCCL_RETURN_IF_ERROR(OverrideMs("FTCCL_LINK_SETTLE_MS", 0, 60000, &o->link_settle));
  FTCCL_RETURN_IF_ERROR(Override("FTCCL_RELAY", 0, 1, &o->relay));
  FTCCL_RETURN_IF_ERROR(Override("FTCCL_BENCH_PAYLOAD_CRC", 0, 1, &o->bench_payload_crc));
  if (const char* hook = std::getenv("FTCCL_FAULT_HOOK")) o->fault_hook = hook;
  if (const char* v = std::getenv("FTCCL_TRANSPORT")) {
    if (std::string(v) != "tcp" && std::string(v) != "verbs") {
      return InvalidArgument(std::string("FTCCL_TRANSPORT='") + v + "': expected tcp or verbs");
    }
    o->transport = v;
  }
  FTCCL_RETURN_IF_ERROR(Override("FTCCL_VERBS_QP_TIMEOUT", 1, 31, &o->verbs_qp_timeout));
  FTCCL_RETURN_IF_ERROR(Override("FTCCL_VERBS_RETRY_COUNT", 0, 7, &o->verbs_retry_count));
  return Status::Ok();
}

std::vector<std::pair<std::string, std::string>> EffectiveKnobs(const CommOptions& o) {
  return {
      {"channels_per_rail", std::to_string(o.channels_per_rail)},
      {"chunk_bytes", std::to_string(o.chunk_bytes)},
      {"slice_bytes", std::to_string(o.slice_bytes)},
      {"small_allreduce_bytes", std::to_string(o.small_allreduce_bytes)},
      {"socket_buffer_bytes", std::to_string(o.socket_buffer_bytes)},
      {"init_timeout_ms", std::to_string(o.init_timeout.count())},
      {"init_path_grace_ms", std::to_string(o.init_path_grace.count())},
      {"op_timeout_ms", std::to_string(o.op_timeout.count())},
      {"suspect_floor_ms", std::to_string(o.suspect_floor.count())},
      {"suspect_ceiling_ms", std::to_string(o.suspect_ceiling.count())},
      {"hedge_floor_ms", std::to_string(o.hedge_floor.count())},
      {"heartbeat_interval_ms", std::to_string(o.heartbeat_interval.count())},
      {"failback_holddown_ms", std::to_string(o.failback_holddown.count())},
      {"failback_holddown_max_ms", std::to_string(o.failback_holddown_max.count())},
      {"flap_window_ms", std::to_string(o.flap_window.count())},
      {"path_queue_ms", std::to_string(o.path_queue.count())},
      {"reconnect_interval_ms", std::to_string(o.reconnect_interval.count())},
      {"tcp_user_timeout_ms", std::to_string(o.tcp_user_timeout.count())},
      {"abort_timeout_ms", std::to_string(o.abort_timeout.count())},
      {"watch_links", o.watch_links ? "1" : "0"},
      {"relay", o.relay ? "1" : "0"},
      {"bench_payload_crc", o.bench_payload_crc ? "1" : "0"},
      {"fault_hook", o.fault_hook},
      {"transport", o.transport},
      {"verbs_qp_timeout", std::to_string(o.verbs_qp_timeout)},
      {"verbs_retry_count", std::to_string(o.verbs_retry_count)},
  };
}

}  // namespace ftccl
