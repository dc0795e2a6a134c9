#include "injector/journal.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

#include "base/clock.h"
#include "base/fd.h"

namespace faultline {
namespace {

Status MkdirP(const std::string& path, mode_t mode) {
  std::string cur;
  std::stringstream ss(path);
  std::string part;
  if (!path.empty() && path[0] == '/') cur = "/";
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    cur += part;
    if (::mkdir(cur.c_str(), mode) != 0 && errno != EEXIST) {
      return ErrnoStatus("mkdir " + cur, errno);
    }
    cur += "/";
  }
  return Status::Ok();
}

Status WriteAll(int fd, const std::string& data, const std::string& path) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write " + path, errno);
    }
    off += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

std::string Journal::DefaultDir() {
  const char* env = std::getenv("FAULTLINE_JOURNAL_DIR");
  if (env != nullptr && *env != '\0') return env;
  return "/run/faultline/journal";
}

Result<std::unique_ptr<Journal>> Journal::Open(std::string dir) {
  if (dir.empty()) return InvalidArgument("empty journal directory");
  FL_RETURN_IF_ERROR(MkdirP(dir, 0700));
  return std::unique_ptr<Journal>(new Journal(std::move(dir)));
}

Status Journal::SyncDir() const {
  UniqueFd d(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!d.valid()) return ErrnoStatus("open journal directory " + dir_, errno);
  if (::fsync(d.get()) != 0) return ErrnoStatus("fsync journal directory " + dir_, errno);
  return Status::Ok();
}

Status Journal::WriteEntry(const std::string& id, const JournalEntry& e) {
  nlohmann::json j = {{"id", id},
                      {"kind", e.kind},
                      {"undo", e.undo},
                      {"pid", e.pid},
                      {"created_mono_ns", e.created_mono_ns}};
  std::string data = j.dump() + "\n";
  std::string final_path = dir_ + "/" + id + ".json";
  std::string tmp_path = dir_ + "/." + id + ".tmp";
  UniqueFd fd(::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!fd.valid()) return ErrnoStatus("create journal entry " + tmp_path, errno);
  Status st = WriteAll(fd.get(), data, tmp_path);
  if (st.ok() && ::fsync(fd.get()) != 0) st = ErrnoStatus("fsync " + tmp_path, errno);
  fd.Reset();
  if (st.ok() && ::rename(tmp_path.c_str(), final_path.c_str()) != 0) {
    st = ErrnoStatus("rename " + tmp_path, errno);
  }
  if (!st.ok()) {
    ::unlink(tmp_path.c_str());
    return st;
  }
  return SyncDir();
}

Result<std::string> Journal::Append(std::string_view kind, const nlohmann::json& undo) {
  JournalEntry e;
  e.kind = std::string(kind);
  e.undo = undo;
  e.pid = static_cast<int>(::getpid());
  e.created_mono_ns = MonoNow();
  char id[96];
  std::snprintf(id, sizeof(id), "%020lld-%07d-%06llu", static_cast<long long>(e.created_mono_ns),
                e.pid, static_cast<unsigned long long>(seq_++));
  e.id = id;
  FL_RETURN_IF_ERROR(WriteEntry(e.id, e));
  return e.id;
}

Status Journal::Update(std::string_view id, std::string_view kind, const nlohmann::json& undo) {
  std::string path = dir_ + "/" + std::string(id) + ".json";
  if (::access(path.c_str(), F_OK) != 0) {
    return NotFound("no journal entry '" + std::string(id) + "' in " + dir_);
  }
  JournalEntry e;
  e.id = std::string(id);
  e.kind = std::string(kind);
  e.undo = undo;
  e.pid = static_cast<int>(::getpid());
  e.created_mono_ns = MonoNow();
  return WriteEntry(e.id, e);
}

Status Journal::Remove(std::string_view id) {
  std::string path = dir_ + "/" + std::string(id) + ".json";
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT) return NotFound("no journal entry '" + std::string(id) + "' in " + dir_);
    return ErrnoStatus("unlink " + path, errno);
  }
  return SyncDir();
}

Result<JournalEntry> ParseJournalEntry(std::string_view text, std::string id,
                                       const std::string& path) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("kind") || !j["kind"].is_string() ||
      !j.contains("undo") || !j["undo"].is_object()) {
    return Internal("corrupt journal entry " + path);
  }
  JournalEntry e;
  e.id = std::move(id);
  e.kind = j["kind"].get<std::string>();
  e.undo = j["undo"];
  // json::value() throws on a value of another type; a hand-edited entry must not end cleanup.
  if (const auto& pid = j["pid"]; pid.is_number_integer()) {
    const int64_t v = pid.get<int64_t>();
    if (v > 0 && v <= std::numeric_limits<int>::max()) e.pid = static_cast<int>(v);
  }
  if (const auto& t = j["created_mono_ns"]; t.is_number_integer()) {
    e.created_mono_ns = t.get<int64_t>();
  }
  return e;
}

Result<std::vector<JournalEntry>> Journal::List() const {
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) return ErrnoStatus("open journal directory " + dir_, errno);
  std::vector<std::string> names;
  while (dirent* de = ::readdir(d)) {
    std::string n = de->d_name;
    if (n.size() > 5 && n[0] != '.' && n.compare(n.size() - 5, 5, ".json") == 0) {
      names.push_back(n);
    }
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  std::vector<JournalEntry> out;
  for (const std::string& n : names) {
    std::string path = dir_ + "/" + n;
    std::ifstream in(path);
    if (!in) continue;  // removed concurrently
    std::stringstream text;
    text << in.rdbuf();
    FL_ASSIGN_OR_RETURN(JournalEntry e, ParseJournalEntry(text.str(), n.substr(0, n.size() - 5), path));
    out.push_back(std::move(e));
  }
  return out;
}

bool Journal::RecordsNetns(std::string_view name) const {
  auto entries = List();
  if (!entries.ok()) return false;
  for (const JournalEntry& e : *entries) {
    if (e.kind != "netns") continue;
    auto ns = e.undo.find("netns");
    if (ns != e.undo.end() && ns->is_string() && ns->get<std::string>() == name) return true;
  }
  return false;
}

}  // namespace faultline
