#include "transport/engine/staging_pool.h"

namespace ftccl::transport::engine {

StagingPool::Buffer& StagingPool::Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    Reset();
    pool_ = std::exchange(o.pool_, nullptr);
    data_ = std::move(o.data_);
    capacity_ = std::exchange(o.capacity_, 0);
  }
  return *this;
}

void StagingPool::Buffer::Reset() {
  if (data_ && pool_ != nullptr) pool_->Put(std::move(data_), capacity_);
  data_.reset();
  pool_ = nullptr;
  capacity_ = 0;
}

StagingPool::Buffer StagingPool::Get(size_t bytes) {
  Buffer b;
  b.pool_ = this;
  // The smallest idle buffer that fits and wastes at most half of itself.
  size_t best = idle_.size();
  for (size_t i = 0; i < idle_.size(); ++i) {
    const size_t cap = idle_[i].first;
    if (cap >= bytes && cap / 2 <= bytes && (best == idle_.size() || cap < idle_[best].first)) {
      best = i;
    }
  }
  if (best < idle_.size()) {
    b.capacity_ = idle_[best].first;
    b.data_ = std::move(idle_[best].second);
    idle_bytes_ -= b.capacity_;
    idle_[best] = std::move(idle_.back());
    idle_.pop_back();
    live_bytes_ += b.capacity_;
    return b;
  }
  b.data_.reset(new uint8_t[bytes]);
  b.capacity_ = bytes;
  live_bytes_ += bytes;
  return b;
}

void StagingPool::Put(std::unique_ptr<uint8_t[]> data, size_t capacity) {
  live_bytes_ -= capacity;
  if (idle_bytes_ + capacity > max_idle_bytes_) return;  // freed here
  idle_bytes_ += capacity;
  idle_.emplace_back(capacity, std::move(data));
}

}  // namespace ftccl::transport::engine
