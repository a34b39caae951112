//===- Tensor.h - host tensors of the runtime -------------------*- C++ -*-===//

#ifndef MFC_RUNTIME_BASE_TENSOR_H
#define MFC_RUNTIME_BASE_TENSOR_H

#include "runtime/base/Status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mfrt {

/// I8: a quantized weight's values (docs/quantization.md), signed.
enum class DType : uint8_t { F32 = 0, F16 = 1, BF16 = 2, I32 = 3, I8 = 4 };

size_t dtypeSize(DType type);
const char *dtypeName(DType type);

using Shape = std::vector<int64_t>;

/// Elements in `shape`, or an error if a dim is negative or the product
/// overflows (shapes come from untrusted files).
StatusOr<int64_t> checkedElementCount(const Shape &shape);
std::string formatShape(const Shape &shape);

float halfToFloat(uint16_t bits);
uint16_t floatToHalf(float value);
float bfloat16ToFloat(uint16_t bits);
uint16_t floatToBfloat16(float value);

/// `n` f16 or bf16 values as f32 (F16C eight at a time where the CPU has
/// it), and f32 values rounded to nearest even into f16 or bf16.
void widenHalves(const uint16_t *in, float *out, int64_t n);
void widenBfloat16s(const uint16_t *in, float *out, int64_t n);
void narrowToHalves(const float *in, uint16_t *out, int64_t n);
void narrowToBfloat16s(const float *in, uint16_t *out, int64_t n);

/// How a kernel reads a weight that the runtime packs once: panels of 32
/// rows (runtime/kernels/PanelGemm.h), or an int8 weight's dot panels
/// (runtime/kernels/Int8DotGemm.h).
enum class PanelLayout : uint8_t { Columns, Int8Dot };

/// `n` values of `dtype` (I32 and I8 converted as numbers) at `from` as f32,
/// and f32 values stored as `dtype` (16-bit types round to nearest even).
void toFloats(DType dtype, const void *from, float *out, int64_t n);
void fromFloats(DType dtype, const float *in, void *to, int64_t n);
/// The `k` integer values of a quantized weight's row stored at `row`
/// (`bits` 8: k bytes; 4: k / 2 bytes, column 2j in the low nibble of byte
/// j) as floats, unscaled.
void quantizedRowToFloats(const int8_t *row, int64_t k, int64_t bits,
                          float *out);

/// Columns [n0, n0 + width) of op(B) for a weight B of `dtype` with K = `k`
/// rows of op(B) — stored [K, N] or, `transposed`, [N, K] — as f32 in `out`
/// laid out as sgemm reads them for the same transB ([K, width], or
/// [width, K]): a 16-bit gemm's panel, a contiguous run at a time.
void panelToFloats(DType dtype, const void *weight, bool transposed, int64_t n0,
                   int64_t width, int64_t k, int64_t n, float *out);

/// Copies indices [begin, begin + length) along dimension `dim` of a
/// row-major tensor of `wholeShape` (elements of `elementSize` bytes) to a
/// dense block, or back into the whole with `intoWhole`: a rank's block of
/// a split tensor.
void copyBlock(const void *from, void *to, const Shape &wholeShape, int64_t dim,
               int64_t begin, int64_t length, size_t elementSize,
               bool intoWhole);

class Allocator;

/// A dense, row-major tensor that owns its bytes (through an Allocator,
/// which may hand the block to the next tensor when this one dies).
class Tensor {
public:
  Tensor() = default;
  Tensor(DType dtype, Shape shape, std::shared_ptr<void> storage);

  DType dtype() const { return dtype_; }
  const Shape &shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_[i]; }
  int64_t numElements() const;
  size_t byteSize() const { return numElements() * dtypeSize(dtype_); }
  bool defined() const { return storage_ != nullptr; }

  void *data() { return storage_.get(); }
  const void *data() const { return storage_.get(); }
  template <typename T> T *as() { return static_cast<T *>(data()); }
  template <typename T> const T *as() const {
    return static_cast<const T *>(data());
  }

  /// The same bytes viewed with another shape of the same element count.
  Tensor reshaped(Shape shape) const;
  /// Rows [first, first + count) of dimension 0, in place (a view that
  /// keeps the whole tensor alive).
  Tensor rows(int64_t first, int64_t count) const;

  /// Element `i` converted to float (any float dtype, or I32).
  float loadFloat(int64_t i) const;
  void storeFloat(int64_t i, float value);
  /// Every element as f32 into `out` / from `in` (a float tensor: I32 is
  /// converted one by one).
  void loadFloats(float *out) const;
  void storeFloats(const float *in);

private:
  DType dtype_ = DType::F32;
  Shape shape_;
  std::shared_ptr<void> storage_;
};

} // namespace mfrt

#endif // MFC_RUNTIME_BASE_TENSOR_H
