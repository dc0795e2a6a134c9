#include "injector/nft.h"

#include <nftables/libnftables.h>
#include <unistd.h>

#include <atomic>

#include "injector/netns.h"

namespace faultline {
namespace {
std::atomic<int> g_table_seq{0};
}  // namespace

Result<NftSession> NftSession::Open(std::string_view netns) {
  FL_ASSIGN_OR_RETURN(UniqueFd fd, OpenNetns(netns));
  FL_ASSIGN_OR_RETURN(ScopedNetns in, ScopedNetns::EnterFd(fd.get()));
  nft_ctx* ctx = nft_ctx_new(NFT_CTX_DEFAULT);
  if (ctx == nullptr) return Internal("nft_ctx_new failed");
  nft_ctx_buffer_output(ctx);
  nft_ctx_buffer_error(ctx);
  return NftSession(std::move(fd), ctx);
}

NftSession::NftSession(NftSession&& o) noexcept : netns_fd_(std::move(o.netns_fd_)), ctx_(o.ctx_) {
  o.ctx_ = nullptr;
}

NftSession::~NftSession() {
  if (ctx_ != nullptr) nft_ctx_free(ctx_);
}

Status NftSession::Run(const std::string& commands) {
  FL_ASSIGN_OR_RETURN(ScopedNetns in, ScopedNetns::EnterFd(netns_fd_.get()));
  nft_ctx_output_set_flags(ctx_, 0);
  int rc = nft_run_cmd_from_buffer(ctx_, commands.c_str());
  if (rc != 0) {
    std::string err = nft_ctx_get_error_buffer(ctx_);
    while (!err.empty() && err.back() == '\n') err.pop_back();
    Code code = Code::kKernel;
    if (err.find("No such file or directory") != std::string::npos) code = Code::kNotFound;
    if (err.find("File exists") != std::string::npos) code = Code::kAlreadyExists;
    return Status(code, "nft: " + err);
  }
  return Status::Ok();
}

Result<nlohmann::json> NftSession::ListJson(const std::string& command) {
  FL_ASSIGN_OR_RETURN(ScopedNetns in, ScopedNetns::EnterFd(netns_fd_.get()));
  nft_ctx_output_set_flags(ctx_, NFT_CTX_OUTPUT_JSON);
  int rc = nft_run_cmd_from_buffer(ctx_, command.c_str());
  nft_ctx_output_set_flags(ctx_, 0);
  if (rc != 0) {
    std::string err = nft_ctx_get_error_buffer(ctx_);
    while (!err.empty() && err.back() == '\n') err.pop_back();
    Code code = err.find("No such file or directory") != std::string::npos ? Code::kNotFound
                                                                           : Code::kKernel;
    return Status(code, "nft: " + err);
  }
  nlohmann::json j = nlohmann::json::parse(nft_ctx_get_output_buffer(ctx_), nullptr, false);
  if (j.is_discarded()) return Internal("nft produced malformed JSON");
  return j;
}

Result<bool> NftSession::HasTable(std::string_view family, std::string_view table) {
  FL_ASSIGN_OR_RETURN(nlohmann::json j, ListJson("list tables " + std::string(family)));
  for (const auto& item : j.value("nftables", nlohmann::json::array())) {
    if (item.contains("table") && item["table"].value("name", "") == table) return true;
  }
  return false;
}

Result<int64_t> NftSession::CounterPackets(std::string_view family, std::string_view table,
                                           std::string_view counter) {
  auto j = ListJson("list counter " + std::string(family) + " " + std::string(table) + " " +
                    std::string(counter));
  if (!j.ok()) {
    if (j.status().code() == Code::kNotFound) return int64_t{-1};
    return j.status();
  }
  for (const auto& item : j->value("nftables", nlohmann::json::array())) {
    if (item.contains("counter")) return item["counter"].value("packets", int64_t{0});
  }
  return int64_t{-1};
}

Status DeleteNftTable(std::string_view netns, std::string_view family, std::string_view table) {
  FL_ASSIGN_OR_RETURN(NftSession s, NftSession::Open(netns));
  FL_ASSIGN_OR_RETURN(bool has, s.HasTable(family, table));
  if (!has) return Status::Ok();
  return s.Run("delete table " + std::string(family) + " " + std::string(table));
}

std::string NewNftTableName(std::string_view kind) {
  return std::string(kNftTablePrefix) + std::string(kind) + "_" + std::to_string(::getpid()) + "_" +
         std::to_string(g_table_seq++);
}

}  // namespace faultline
