// Buffers for data that arrives before its receive is posted (a peer that is a step ahead).
//
// A message staged this way is typically the size of a pipeline slice, and such messages come
// with every collective. Fresh allocations of that size are fresh pages to the kernel (malloc
// maps them and trims them again when they are freed), so every staged byte used to cost a page
// fault on top of its copy. The pool keeps freed buffers, up to a bound, for the next message.
//
// Thread-safety: none; the engine's progress thread owns the pool and every buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace ftccl::transport::engine {

class StagingPool {
 public:
  // A buffer of at least the size asked for; goes back to its pool when destroyed. The pool
  // must outlive it.
  class Buffer {
   public:
    Buffer() = default;
    Buffer(Buffer&& o) noexcept { *this = std::move(o); }
    Buffer& operator=(Buffer&& o) noexcept;
    ~Buffer() { Reset(); }
    uint8_t* get() const { return data_.get(); }
    size_t capacity() const { return capacity_; }
    void Reset();

   private:
    friend class StagingPool;
    StagingPool* pool_ = nullptr;
    std::unique_ptr<uint8_t[]> data_;
    size_t capacity_ = 0;
  };

  // Keeps at most `max_idle_bytes` of freed buffers.
  explicit StagingPool(size_t max_idle_bytes) : max_idle_bytes_(max_idle_bytes) {}
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  // A buffer of at least `bytes` (> 0): an idle one of at most twice that size, else a new one.
  Buffer Get(size_t bytes);

  size_t idle_bytes() const { return idle_bytes_; }
  // Bytes of the buffers handed out and not yet returned.
  size_t live_bytes() const { return live_bytes_; }

 private:
  void Put(std::unique_ptr<uint8_t[]> data, size_t capacity);

  const size_t max_idle_bytes_;
  size_t idle_bytes_ = 0;
  size_t live_bytes_ = 0;
  std::vector<std::pair<size_t, std::unique_ptr<uint8_t[]>>> idle_;
};

}  // namespace ftccl::transport::engine
