// The train workload's model and checkpoint files (runner/worker/train_model.h): the closed-form
// block sum against brute force, and checkpoints that round-trip, keep the previous one, and
// are refused with a clear error when truncated, corrupt or of another job.
#include "runner/worker/train_model.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace faultline::runner::train {
namespace {

int64_t BruteForce(uint64_t first, uint64_t count, uint64_t i, uint64_t seed) {
  int64_t sum = 0;
  for (uint64_t x = first; x < first + count; ++x) {
    sum += static_cast<int64_t>((x + i + seed) % 16) - 8;
  }
  return sum;
}

TEST(TrainModelTest, BlockSumMatchesBruteForce) {
  for (uint64_t seed : {0ull, 5ull, 123456789ull}) {
    for (uint64_t first : {0ull, 1ull, 7ull, 15ull, 16ull, 1000003ull}) {
      for (uint64_t count = 0; count <= 70; ++count) {
        for (uint64_t i : {0ull, 3ull, 15ull, 1023ull}) {
          ASSERT_EQ(BlockSum(first, count, i, seed), BruteForce(first, count, i, seed))
              << "first " << first << " count " << count << " i " << i << " seed " << seed;
        }
      }
    }
  }
  // A huge seed wraps the same way as the sum of the residues.
  const uint64_t big = ~uint64_t{0} - 3;
  EXPECT_EQ(BlockSum(9, 40, 2, big), BruteForce(9, 40, 2, big % 16));
}

TEST(TrainModelTest, GradientAndItsCheck) {
  std::vector<float> g(64);
  FillGradient(24, 8, 3, g.data(), g.size());
  for (uint64_t i = 0; i < g.size(); ++i) EXPECT_EQ(g[i], BruteForce(24, 8, i, 3));
  EXPECT_EQ(CountWrongGradient(24, 8, 3, g.data(), g.size()), 0u);
  g[5] += 1;
  g[63] = -g[63] - 1;
  EXPECT_EQ(CountWrongGradient(24, 8, 3, g.data(), g.size()), 2u);
  EXPECT_DOUBLE_EQ(Loss({2.0f, -4.0f}), 0.5 * (4 + 16) / 2);
  EXPECT_EQ(ParamSha256({}),  // SHA-256 of nothing
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

// A survivor ahead by one step after a shrink undoes that step (worker.cc AgreeOnStep) by
// adding back the whole step block's gradient, recomputed from its samples: exact, so its
// parameters are bit for bit those of the members that never took the step, and of the model.
TEST(TrainModelTest, UndoingAStepRestoresTheParametersExactly) {
  const uint64_t seed = 7, batch = 1000, params = 257;
  const int ranks = 3;
  // Near the end of the exact range, where a rounding would show first.
  uint64_t base = kMaxSamples - 20 * ranks * batch;
  std::vector<float> p(params), g(params), sum(params);
  for (uint64_t i = 0; i < params; ++i) p[i] = static_cast<float>(-BlockSum(0, base, i, seed));
  const std::vector<float> before = p;
  // The step: each rank's gradient, summed in ring order (2, 0, 1) as a reduction might.
  std::fill(sum.begin(), sum.end(), 0.0f);
  for (int q : {2, 0, 1}) {
    FillGradient(base + q * batch, batch, seed, g.data(), params);
    for (uint64_t i = 0; i < params; ++i) sum[i] += g[i];
  }
  for (uint64_t i = 0; i < params; ++i) p[i] -= sum[i];
  for (uint64_t i = 0; i < params; ++i) {
    ASSERT_EQ(p[i], static_cast<float>(-BlockSum(0, base + ranks * batch, i, seed))) << i;
  }
  // The undo.
  FillGradient(base, ranks * batch, seed, g.data(), params);
  for (uint64_t i = 0; i < params; ++i) p[i] += g[i];
  EXPECT_EQ(std::memcmp(p.data(), before.data(), params * sizeof(float)), 0);
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/faultline_ckpt_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  static Checkpoint Sample(int64_t steps) {
    Checkpoint c;
    c.steps = steps;
    c.samples = static_cast<uint64_t>(steps) * 24;
    c.seed = 7;
    c.excluded = {2};
    for (int i = 0; i < 100; ++i) c.params.push_back(static_cast<float>(i - steps));
    return c;
  }
  std::string Bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  void Put(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  }
  std::string dir_;
};

TEST_F(CheckpointTest, RoundTripKeepsThePreviousOne) {
  auto first = WriteCheckpoint(dir_, 1, Sample(5));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = WriteCheckpoint(dir_, 1, Sample(10));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(*second, std::filesystem::file_size(CheckpointPath(dir_, 1)));
  auto newest = ReadCheckpoint(CheckpointPath(dir_, 1), 100, 7);
  ASSERT_TRUE(newest.ok()) << newest.status().ToString();
  EXPECT_EQ(newest->steps, 10);
  EXPECT_EQ(newest->samples, 240u);
  EXPECT_EQ(newest->excluded, std::vector<int>{2});
  EXPECT_EQ(newest->params, Sample(10).params);
  auto prev = ReadCheckpoint(PrevCheckpointPath(dir_, 1), 100, 7);
  ASSERT_TRUE(prev.ok()) << prev.status().ToString();
  EXPECT_EQ(prev->steps, 5);
  EXPECT_EQ(prev->params, Sample(5).params);
  EXPECT_FALSE(std::filesystem::exists(CheckpointPath(dir_, 1) + ".tmp"));
  EXPECT_EQ(ReadCheckpoint(CheckpointPath(dir_, 0), 100, 7).status().code(), Code::kNotFound);
}

// The caller hears of a checkpoint as soon as a process killed from then on would resume from
// it: the file already has its newest name and reads back, the previous one kept beside it.
TEST_F(CheckpointTest, ItIsReportedOnceItHasItsNameAndReadsBack) {
  ASSERT_TRUE(WriteCheckpoint(dir_, 1, Sample(5)).ok());
  int calls = 0;
  auto w = WriteCheckpoint(dir_, 1, Sample(10), [&](uint64_t bytes) {
    ++calls;
    EXPECT_EQ(bytes, std::filesystem::file_size(CheckpointPath(dir_, 1)));
    auto seen = ReadCheckpoint(CheckpointPath(dir_, 1), 100, 7);
    ASSERT_TRUE(seen.ok()) << seen.status().ToString();
    EXPECT_EQ(seen->steps, 10);
    auto prev = ReadCheckpoint(PrevCheckpointPath(dir_, 1), 100, 7);
    ASSERT_TRUE(prev.ok()) << prev.status().ToString();
    EXPECT_EQ(prev->steps, 5);
  });
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(calls, 1);
  // Nothing is reported for a checkpoint that could not be written.
  auto bad = WriteCheckpoint(dir_ + "/missing", 0, Sample(1), [&](uint64_t) { ++calls; });
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(calls, 1);
}

TEST_F(CheckpointTest, BadFilesAreClearErrors) {
  ASSERT_TRUE(WriteCheckpoint(dir_, 0, Sample(5)).ok());
  const std::string path = CheckpointPath(dir_, 0);
  const std::string good = Bytes(path);
  auto error_of = [&](const std::string& bytes, uint64_t params = 100, uint64_t seed = 7) {
    Put(path, bytes);
    auto c = ReadCheckpoint(path, params, seed);
    EXPECT_FALSE(c.ok());
    return c.ok() ? std::string() : c.status().ToString();
  };
  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x10;
  EXPECT_NE(error_of(flipped).find("checksum"), std::string::npos);
  EXPECT_NE(error_of(good.substr(0, good.size() - 9)).find("truncated"), std::string::npos);
  EXPECT_NE(error_of(good.substr(0, 12)).find("truncated"), std::string::npos);
  EXPECT_NE(error_of("").find("truncated"), std::string::npos);
  EXPECT_NE(error_of("not a checkpoint at all, just text").find("magic"), std::string::npos);
  EXPECT_NE(error_of(good, 200).find("100 parameters, this job has 200"), std::string::npos);
  EXPECT_NE(error_of(good, 100, 8).find("seed 7"), std::string::npos);
  // A huge parameter count in a short file is refused before allocating anything.
  std::string huge = good;
  const uint64_t lots = uint64_t{1} << 60;
  std::memcpy(huge.data() + 8 + 4 + 8 + 8, &lots, sizeof(lots));
  EXPECT_NE(error_of(huge, lots).find("sizes"), std::string::npos);
  // Every error names the file.
  EXPECT_NE(error_of(flipped).find(path), std::string::npos);
  Put(path, good);
  EXPECT_TRUE(ReadCheckpoint(path, 100, 7).ok());
}

TEST_F(CheckpointTest, UnwritableDirectoryIsAnError) {
  auto w = WriteCheckpoint(dir_ + "/missing", 0, Sample(1));
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().ToString().find(dir_ + "/missing"), std::string::npos);
}

}  // namespace
}  // namespace faultline::runner::train
