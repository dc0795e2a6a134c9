#include "runner/worker/train_model.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "runner/core/report_json.h"

namespace faultline::runner::train {
namespace {

// Sum of (j mod 16) for j in [0, n).
int64_t ModPrefix(uint64_t n) {
  const int64_t m = static_cast<int64_t>(n % 16);
  return static_cast<int64_t>(n / 16) * 120 + m * (m - 1) / 2;
}

constexpr char kMagic[8] = {'F', 'L', 'T', 'C', 'K', 'P', 'T', '\0'};

uint64_t Fnv1a(const char* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t k = 0; k < n; ++k) {
    h ^= static_cast<unsigned char>(p[k]);
    h *= 0x100000001b3ull;
  }
  return h;
}

template <typename T>
void Put(std::string* out, const T& v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

// Reads fixed-size values off the front of a byte string; false once it runs out.
class Reader final {
 public:
  explicit Reader(const std::string& s) : s_(s) {}
  template <typename T>
  bool Get(T* v) {
    if (s_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(v, s_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool GetBytes(void* dst, size_t n) {
    if (s_.size() - pos_ < n) return false;
    std::memcpy(dst, s_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  size_t pos() const { return pos_; }

 private:
  const std::string& s_;
  size_t pos_ = 0;
};

Status WriteAll(int fd, const std::string& data, const std::string& path) {
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    const ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("write " + path, errno);
    p += n;
    left -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status FsyncPath(const std::string& path, int flags) {
  const int fd = open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open " + path, errno);
  const int rc = fsync(fd);
  const int err = errno;
  close(fd);
  if (rc != 0) return ErrnoStatus("fsync " + path, err);
  return Status::Ok();
}

}  // namespace

int64_t SampleValue(uint64_t x, uint64_t i, uint64_t seed) {
  return static_cast<int64_t>((x % 16 + i % 16 + seed % 16) % 16) - 8;
}

int64_t BlockSum(uint64_t first, uint64_t count, uint64_t i, uint64_t seed) {
  // The values are ((a + k) mod 16) - 8 for k in [0, count), a = (first + i + seed) mod 16.
  const uint64_t a = (first % 16 + i % 16 + seed % 16) % 16;
  return ModPrefix(a + count) - ModPrefix(a) - 8 * static_cast<int64_t>(count);
}

void FillGradient(uint64_t first, uint64_t count, uint64_t seed, float* out, uint64_t params) {
  for (uint64_t i = 0; i < params; ++i) {
    out[i] = static_cast<float>(BlockSum(first, count, i, seed));
  }
}

uint64_t CountWrongGradient(uint64_t first, uint64_t count, uint64_t seed, const float* got,
                            uint64_t params) {
  uint64_t wrong = 0;
  for (uint64_t i = 0; i < params; ++i) {
    if (got[i] != static_cast<float>(BlockSum(first, count, i, seed))) ++wrong;
  }
  return wrong;
}

double Loss(const std::vector<float>& params) {
  if (params.empty()) return 0;
  double sum = 0;
  for (float p : params) sum += static_cast<double>(p) * p;
  return 0.5 * sum / static_cast<double>(params.size());
}

std::string ParamSha256(const std::vector<float>& params) {
  return Sha256Hex(std::string(reinterpret_cast<const char*>(params.data()),
                               params.size() * sizeof(float)));
}

std::string EncodeCheckpoint(const Checkpoint& c) {
  std::string out(kMagic, sizeof(kMagic));
  Put(&out, kCheckpointVersion);
  Put(&out, c.steps);
  Put(&out, c.samples);
  Put(&out, static_cast<uint64_t>(c.params.size()));
  Put(&out, c.seed);
  Put(&out, static_cast<uint32_t>(c.excluded.size()));
  for (int r : c.excluded) Put(&out, static_cast<int32_t>(r));
  out.append(reinterpret_cast<const char*>(c.params.data()), c.params.size() * sizeof(float));
  Put(&out, Fnv1a(out.data(), out.size()));
  return out;
}

Result<Checkpoint> DecodeCheckpoint(const std::string& bytes, const std::string& name,
                                    uint64_t params, uint64_t seed) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("checkpoint " + name + ": " + why);
  };
  Reader in(bytes);
  char magic[sizeof(kMagic)];
  if (!in.GetBytes(magic, sizeof(magic))) return bad("truncated (no header)");
  if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) return bad("not a checkpoint (magic)");
  uint32_t version = 0;
  Checkpoint c;
  uint64_t p = 0;
  uint32_t n_excluded = 0;
  if (!in.Get(&version) || !in.Get(&c.steps) || !in.Get(&c.samples) || !in.Get(&p) ||
      !in.Get(&c.seed) || !in.Get(&n_excluded)) {
    return bad("truncated (header)");
  }
  if (version != kCheckpointVersion) {
    return bad("version " + std::to_string(version) + ", this worker reads " +
               std::to_string(kCheckpointVersion));
  }
  // Sizes before allocating: a corrupt count must not ask for memory the file cannot hold.
  const uint64_t rest = bytes.size() - in.pos();
  if (n_excluded > rest / 4 || p > rest / 4 ||
      uint64_t{n_excluded} * 4 + p * 4 + sizeof(uint64_t) != rest) {
    return bad("truncated or corrupt (its sizes do not match its length of " +
               std::to_string(bytes.size()) + " bytes)");
  }
  const size_t body = bytes.size() - sizeof(uint64_t);
  uint64_t sum = 0;
  std::memcpy(&sum, bytes.data() + body, sizeof(sum));
  if (sum != Fnv1a(bytes.data(), body)) return bad("corrupt (checksum mismatch)");
  if (c.steps < 0) return bad("negative step count");
  if (p != params) {
    return bad("holds " + std::to_string(p) + " parameters, this job has " +
               std::to_string(params) + " (another --grad-bytes)");
  }
  if (c.seed != seed) {
    return bad("was written with seed " + std::to_string(c.seed) + ", this job has " +
               std::to_string(seed));
  }
  for (uint32_t k = 0; k < n_excluded; ++k) {
    int32_t r = 0;
    if (!in.Get(&r)) return bad("truncated (excluded ranks)");
    c.excluded.push_back(r);
  }
  c.params.resize(p);
  if (!in.GetBytes(c.params.data(), p * sizeof(float))) return bad("truncated (parameters)");
  return c;
}

std::string CheckpointPath(const std::string& dir, int rank) {
  return dir + "/rank-" + std::to_string(rank) + ".ckpt";
}

std::string PrevCheckpointPath(const std::string& dir, int rank) {
  return dir + "/rank-" + std::to_string(rank) + ".prev.ckpt";
}

Result<uint64_t> WriteCheckpoint(const std::string& dir, int rank, const Checkpoint& c,
                                 const std::function<void(uint64_t)>& on_visible) {
  const std::string path = CheckpointPath(dir, rank);
  const std::string prev = PrevCheckpointPath(dir, rank);
  const std::string tmp = path + ".tmp";
  const std::string bytes = EncodeCheckpoint(c);
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("open " + tmp, errno);
  Status st = WriteAll(fd, bytes, tmp);
  if (st.ok() && fsync(fd) != 0) st = ErrnoStatus("fsync " + tmp, errno);
  close(fd);
  if (!st.ok()) {
    unlink(tmp.c_str());
    return st;
  }
  // The newest becomes the previous one (a hard link, so that the newest name is never
  // missing), then the new file takes the newest name.
  struct stat sb;
  if (stat(path.c_str(), &sb) == 0) {
    const std::string prev_tmp = prev + ".tmp";
    unlink(prev_tmp.c_str());
    if (link(path.c_str(), prev_tmp.c_str()) != 0 || rename(prev_tmp.c_str(), prev.c_str()) != 0) {
      const Status err = ErrnoStatus("keep " + path + " as " + prev, errno);
      unlink(prev_tmp.c_str());
      unlink(tmp.c_str());
      return err;
    }
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const Status err = ErrnoStatus("rename " + tmp + " to " + path, errno);
    unlink(tmp.c_str());
    return err;
  }
  if (on_visible) on_visible(bytes.size());
  st = FsyncPath(dir, O_RDONLY | O_DIRECTORY);
  if (!st.ok()) return st;
  return static_cast<uint64_t>(bytes.size());
}

Result<Checkpoint> ReadCheckpoint(const std::string& path, uint64_t params, uint64_t seed) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFound("no checkpoint " + path);
    return ErrnoStatus("open " + path, errno);
  }
  std::string bytes;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const Status err = ErrnoStatus("read " + path, errno);
      close(fd);
      return err;
    }
    if (n == 0) break;
    bytes.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return DecodeCheckpoint(bytes, path, params, seed);
}

}  // namespace faultline::runner::train
