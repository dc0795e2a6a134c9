// SplitMix64: a small random generator whose output is fixed by its definition (unlike the
// standard distributions, whose algorithms differ between library implementations), so a
// seeded timeline is the same everywhere. Not thread-safe; one per stream.
#pragma once

#include <cstdint>

namespace faultline::runner {

class SplitMix64 final {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [-bound, +bound] up to a modulo bias below span/2^64 (negligible for
  // durations in nanoseconds). bound <= 0 gives 0.
  int64_t Symmetric(int64_t bound) {
    if (bound <= 0) return 0;
    const uint64_t span = static_cast<uint64_t>(bound) * 2 + 1;
    return static_cast<int64_t>(Next() % span) - bound;
  }

 private:
  uint64_t state_;
};

}  // namespace faultline::runner
