// Reference: inputs and analytically known results of ftccl collectives, computed without
// the library.
//
// Inputs are chosen so that the exact result does not depend on the order of the reduction
// and is representable in every type:
//  - float types, sum/avg: k * 2^-F with a signed k of few enough bits that every partial sum
//    over 8 ranks is exact (f16 and bf16 included);
//  - float types, prod: +-{1, 2, 1/2} (f16/bf16) or a few small odd factors (f32/f64), so every
//    partial product is exact;
//  - float types, min/max: any representable value, infinities included, never -0 or NaN;
//  - integer types: full-width values; sums and products wrap in the type (order-independent
//    modular arithmetic), min/max compare signed for i32/i64 and unsigned for u8;
//  - avg: the sum, then divided by the rank count as documented in ftccl/types.h.
// Data-movement collectives move arbitrary bit patterns (NaN payloads included) and are
// compared bitwise. Everything is keyed by (salt, source rank, element index), so an element
// delivered to the wrong place is caught.
//
// The IEEE binary16 and bfloat16 helpers here are an independent implementation (exact
// arithmetic on doubles), used to check the library's own conversions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ftccl/types.h"

namespace ftccl::test {

// --- IEEE binary16 / bfloat16 reference --------------------------------------------------

enum class Half16 { kF16, kBF16 };
// Rounds `x` to the nearest value of the format (ties to even); overflow gives +-inf.
double RoundTo16(double x, Half16 format);
// Encodes a value of the format (as returned by RoundTo16); NaN becomes the quiet NaN.
uint16_t Encode16(double x, Half16 format);
double Decode16(uint16_t bits, Half16 format);

// --- inputs and expected values ----------------------------------------------------------

bool IsFloatType(DataType dt);

// Encodes a float whose value the format represents exactly (no rounding needed).
uint16_t Encode16Exact(float f, Half16 format);

// Inputs and results of one reducing case (dtype, reduction, salt).
class ReduceRef final {
 public:
  ReduceRef(DataType dt, ReduceOp op, uint64_t salt);
  // Bits of element `index` of `rank`'s input.
  uint64_t InputBits(int rank, uint64_t index) const;
  // Bits of the reduction over ranks 0..ranks-1 of element `index`.
  uint64_t ExpectedBits(int ranks, uint64_t index) const;

 private:
  double FloatInput(uint64_t h) const;
  uint64_t IntInput(uint64_t h) const;
  uint64_t EncodeExact(double x) const;
  uint64_t Hash(int rank, uint64_t index) const;

  DataType dt_;
  ReduceOp op_;
  uint64_t key_;
  bool is_float_;
  int bits_ = 0;                   // float sum/min/max: signed bits of k
  double scale_ = 1;               // float sum/min/max: value = k * scale_
  const double* table_ = nullptr;  // float prod: the factors
  uint64_t table_size_ = 0;
  uint64_t mask_;
};

// Data of one data-movement case: arbitrary bit patterns keyed by (salt, rank, index).
class MoveRef final {
 public:
  MoveRef(DataType dt, uint64_t salt);
  uint64_t Bits(int rank, uint64_t index) const;

 private:
  uint64_t key_;
  uint64_t mask_;
};

// Element access in a raw buffer (little-endian, DataTypeSize(dt) bytes per element).
void StoreBits(void* buffer, DataType dt, size_t index, uint64_t bits);
uint64_t LoadBits(const void* buffer, DataType dt, size_t index);
// "0x3c00 (1)" style rendering of an element, for failure messages.
std::string FormatBits(DataType dt, uint64_t bits);

// --- buffers -------------------------------------------------------------------------------

// A byte buffer with guard zones on both sides, to catch writes outside the element range.
// Its storage comes from a per-process pool of earlier buffers' storage, filled afresh: a
// test that runs case after case at 64 MiB then pays neither a fresh mapping nor its page
// faults per case (a quarter of the 64 MiB collective tests' time went to them); a buffer of
// 2 MiB or more asks for transparent huge pages besides, where the kernel offers them.
class GuardedBuffer final {
 public:
  static constexpr size_t kGuard = 64;
  static constexpr uint8_t kGuardByte = 0xa5;
  static constexpr uint8_t kFillByte = 0xcd;

  // `misalign` shifts the data start by that many bytes (0 keeps it 64-byte aligned). The
  // data bytes hold kFillByte, unless `fill` is false: then they are left as they are, for a
  // buffer the caller writes in full before it is read.
  explicit GuardedBuffer(size_t bytes, size_t misalign = 0, bool fill = true);
  ~GuardedBuffer();
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  uint8_t* data() { return storage_.get() + kGuard + misalign_; }
  const uint8_t* data() const { return storage_.get() + kGuard + misalign_; }
  size_t bytes() const { return bytes_; }
  // Empty when both guard zones are intact; otherwise what was found.
  std::string CheckGuards() const;
  // True when every data byte still holds kFillByte.
  bool Untouched() const;
  // A cheap digest of the data bytes, to check that a send buffer was not modified.
  uint64_t Digest() const;

  // Frees storage (std::free); public for the storage pool.
  struct Free {
    void operator()(uint8_t* p) const;
  };

 private:
  size_t bytes_;
  size_t misalign_;
  size_t capacity_ = 0;
  std::unique_ptr<uint8_t, Free> storage_;
};

}  // namespace ftccl::test
