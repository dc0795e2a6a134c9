// nftables through libnftables, inside a named network namespace.
//
// Every fault that uses nftables owns exactly one table (family netdev, name prefix
// "faultline_"), so removing the fault is one atomic "delete table". Not thread-safe: one
// NftSession per thread (each call enters the namespace for its duration).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/fd.h"
#include "base/status.h"

struct nft_ctx;

namespace faultline {

inline constexpr const char* kNftTablePrefix = "faultline_";

class NftSession final {
 public:
  static Result<NftSession> Open(std::string_view netns);
  NftSession(NftSession&&) noexcept;
  NftSession& operator=(NftSession&&) = delete;
  NftSession(const NftSession&) = delete;
  ~NftSession();

  // Runs nft commands (the nft language); errors carry nft's message.
  Status Run(const std::string& commands);
  // Runs a "list ..." command and returns its JSON output.
  Result<nlohmann::json> ListJson(const std::string& command);
  // Whether `table` exists in `family`.
  Result<bool> HasTable(std::string_view family, std::string_view table);
  // Named counter packets in a table (-1 when absent).
  Result<int64_t> CounterPackets(std::string_view family, std::string_view table,
                                 std::string_view counter);

 private:
  NftSession(UniqueFd netns_fd, nft_ctx* ctx) : netns_fd_(std::move(netns_fd)), ctx_(ctx) {}
  UniqueFd netns_fd_;
  nft_ctx* ctx_ = nullptr;
};

// Deletes `family table` in `netns`; Ok when it is already gone.
Status DeleteNftTable(std::string_view netns, std::string_view family, std::string_view table);
// A fresh table name for one fault: faultline_<kind>_<pid>_<seq>.
std::string NewNftTableName(std::string_view kind);

}  // namespace faultline
