//===- Tensor.cpp - host tensors of the runtime ---------------------------===//

#include "runtime/base/Tensor.h"

#include "shapes/ShapeRules.h"

#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

using namespace mfrt;

size_t mfrt::dtypeSize(DType type) {
  switch (type) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::I8:
    return 1;
  }
  return 4;
}

const char *mfrt::dtypeName(DType type) {
  switch (type) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::I32:
    return "i32";
  case DType::I8:
    return "i8";
  }
  return "?";
}

StatusOr<int64_t> mfrt::checkedElementCount(const Shape &shape) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0) {
      return Status::error(StatusCode::InvalidArgument,
                           "negative dimension in shape " + formatShape(shape));
    }
    if (dim != 0 && count > std::numeric_limits<int64_t>::max() / 8 / dim) {
      return Status::error(StatusCode::ResourceExhausted,
                           "shape " + formatShape(shape) + " is too large");
    }
    count *= dim;
  }
  return count;
}

void mfrt::copyBlock(const void *from, void *to, const Shape &wholeShape,
                     int64_t dim, int64_t begin, int64_t length,
                     size_t elementSize, bool intoWhole) {
  int64_t outer = 1, inner = static_cast<int64_t>(elementSize);
  for (int64_t d = 0; d < dim; ++d) {
    outer *= wholeShape[d];
  }
  for (size_t d = dim + 1; d < wholeShape.size(); ++d) {
    inner *= wholeShape[d];
  }
  int64_t run = length * inner; // bytes of the block in one outer row
  for (int64_t o = 0; o < outer; ++o) {
    int64_t wholeAt = (o * wholeShape[dim] + begin) * inner, blockAt = o * run;
    if (intoWhole) {
      std::memcpy(static_cast<uint8_t *>(to) + wholeAt,
                  static_cast<const uint8_t *>(from) + blockAt, run);
    } else {
      std::memcpy(static_cast<uint8_t *>(to) + blockAt,
                  static_cast<const uint8_t *>(from) + wholeAt, run);
    }
  }
}

std::string mfrt::formatShape(const Shape &shape) {
  return mfshapes::formatShape(shape);
}

float mfrt::halfToFloat(uint16_t bits) {
  uint32_t sign = (bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1f;
  uint32_t mantissa = bits & 0x3ff;
  uint32_t result;
  if (exponent == 0) {
    if (mantissa == 0) {
      result = sign;
    } else { // subnormal: normalize
      exponent = 127 - 15 + 1;
      while ((mantissa & 0x400) == 0) {
        mantissa <<= 1;
        --exponent;
      }
      mantissa &= 0x3ff;
      result = sign | (exponent << 23) | (mantissa << 13);
    }
  } else if (exponent == 0x1f) {
    result = sign | 0x7f800000u | (mantissa << 13);
  } else {
    result = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  float value;
  std::memcpy(&value, &result, 4);
  return value;
}

uint16_t mfrt::floatToHalf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  uint32_t sign = (bits >> 16) & 0x8000u;
  int32_t exponent = static_cast<int32_t>((bits >> 23) & 0xff) - 127 + 15;
  uint32_t mantissa = bits & 0x7fffff;
  if (((bits >> 23) & 0xff) == 0xff) { // inf or nan
    return sign | 0x7c00u | (mantissa ? 0x200u : 0);
  }
  if (exponent >= 0x1f) {
    return sign | 0x7c00u;
  }
  if (exponent <= 0) {
    if (exponent < -10) {
      return sign;
    }
    mantissa |= 0x800000;
    uint32_t shift = 14 - exponent;
    uint32_t half = mantissa >> shift;
    uint32_t rest = mantissa & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1))) {
      ++half;
    }
    return sign | half;
  }
  uint32_t half = sign | (exponent << 10) | (mantissa >> 13);
  uint32_t rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) {
    ++half; // may carry into the exponent, which rounds up correctly
  }
  return half;
}

float mfrt::bfloat16ToFloat(uint16_t bits) {
  uint32_t widened = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &widened, 4);
  return value;
}

uint16_t mfrt::floatToBfloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7fffffff) > 0x7f800000) {
    return static_cast<uint16_t>((bits >> 16) | 0x40); // quiet nan
  }
  uint32_t rounding = 0x7fff + ((bits >> 16) & 1); // round to nearest even
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

namespace {

/// Whether this CPU has F16C (CPUID 1, ECX bit 29) and AVX for its ymm
/// results. (Asked by CPUID: clang's __builtin_cpu_supports has no "f16c".)
bool hasF16C() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __builtin_cpu_supports("avx") &&
         __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx >> 29 & 1u);
}

/// Asked once, on first use (not in a static initializer, which may run
/// before the CPU-feature data is set up).
bool f16c() {
  static const bool value = hasF16C();
  return value;
}

/// A 16-bit element that may lie at an odd address (a tensor mapped
/// straight from a safetensors file whose header has an odd length).
inline uint16_t load16(const uint16_t *at) {
  uint16_t value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

__attribute__((target("avx,f16c"))) void
widenHalvesF16C(const uint16_t *in, float *out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i half = _mm_loadu_si128(reinterpret_cast<const __m128i *>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(half));
  }
  for (; i < n; ++i) {
    out[i] = mfrt::halfToFloat(load16(in + i));
  }
}

__attribute__((target("avx,f16c"))) void
narrowToHalvesF16C(const float *in, uint16_t *out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i half = _mm256_cvtps_ph(
        _mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i *>(out + i), half);
  }
  for (; i < n; ++i) {
    out[i] = mfrt::floatToHalf(in[i]);
  }
}

} // namespace

void mfrt::widenHalves(const uint16_t *in, float *out, int64_t n) {
  if (f16c()) {
    widenHalvesF16C(in, out, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    out[i] = halfToFloat(load16(in + i));
  }
}

void mfrt::widenBfloat16s(const uint16_t *in, float *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) { // the high half of an f32 (vectorizes)
    uint32_t word = static_cast<uint32_t>(load16(in + i)) << 16;
    std::memcpy(out + i, &word, sizeof word);
  }
}

void mfrt::narrowToHalves(const float *in, uint16_t *out, int64_t n) {
  if (f16c()) {
    narrowToHalvesF16C(in, out, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    out[i] = floatToHalf(in[i]);
  }
}

void mfrt::narrowToBfloat16s(const float *in, uint16_t *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = floatToBfloat16(in[i]);
  }
}

Tensor::Tensor(DType dtype, Shape shape, std::shared_ptr<void> storage)
    : dtype_(dtype), shape_(std::move(shape)), storage_(std::move(storage)) {}

int64_t Tensor::numElements() const {
  int64_t count = 1;
  for (int64_t dim : shape_) {
    count *= dim;
  }
  return count;
}

Tensor Tensor::reshaped(Shape shape) const {
  Tensor view = *this;
  view.shape_ = std::move(shape);
  return view;
}

Tensor Tensor::rows(int64_t first, int64_t count) const {
  Shape shape = shape_;
  size_t rowBytes = shape_[0] > 0 ? byteSize() / shape_[0] : 0;
  shape[0] = count;
  std::shared_ptr<void> view(storage_, static_cast<char *>(storage_.get()) +
                                           first * rowBytes);
  return Tensor(dtype_, std::move(shape), std::move(view));
}

float Tensor::loadFloat(int64_t i) const {
  switch (dtype_) {
  case DType::F32:
    return as<float>()[i];
  case DType::F16:
    return halfToFloat(as<uint16_t>()[i]);
  case DType::BF16:
    return bfloat16ToFloat(as<uint16_t>()[i]);
  case DType::I32:
    return static_cast<float>(as<int32_t>()[i]);
  case DType::I8:
    return static_cast<float>(as<int8_t>()[i]);
  }
  return 0;
}

void Tensor::storeFloat(int64_t i, float value) {
  switch (dtype_) {
  case DType::F32:
    as<float>()[i] = value;
    return;
  case DType::F16:
    as<uint16_t>()[i] = floatToHalf(value);
    return;
  case DType::BF16:
    as<uint16_t>()[i] = floatToBfloat16(value);
    return;
  case DType::I32:
    as<int32_t>()[i] = static_cast<int32_t>(value);
    return;
  case DType::I8:
    fromFloats(DType::I8, &value, as<int8_t>() + i, 1);
    return;
  }
}

void mfrt::toFloats(DType dtype, const void *from, float *out, int64_t n) {
  switch (dtype) {
  case DType::F32:
    std::memcpy(out, from, n * sizeof(float));
    return;
  case DType::F16:
    widenHalves(static_cast<const uint16_t *>(from), out, n);
    return;
  case DType::BF16:
    widenBfloat16s(static_cast<const uint16_t *>(from), out, n);
    return;
  case DType::I32:
    for (int64_t i = 0; i < n; ++i) {
      out[i] = static_cast<float>(static_cast<const int32_t *>(from)[i]);
    }
    return;
  case DType::I8:
    for (int64_t i = 0; i < n; ++i) {
      out[i] = static_cast<float>(static_cast<const int8_t *>(from)[i]);
    }
    return;
  }
}

void mfrt::panelToFloats(DType dtype, const void *weight, bool transposed,
                         int64_t n0, int64_t width, int64_t k, int64_t n,
                         float *out) {
  const char *bytes = static_cast<const char *>(weight);
  size_t element = dtypeSize(dtype);
  if (transposed) { // rows n0.. of [N, K], one run
    toFloats(dtype, bytes + n0 * k * element, out, width * k);
    return;
  }
  for (int64_t row = 0; row < k; ++row) { // columns n0.. of [K, N]
    toFloats(dtype, bytes + (row * n + n0) * element, out + row * width, width);
  }
}

void mfrt::fromFloats(DType dtype, const float *in, void *to, int64_t n) {
  switch (dtype) {
  case DType::F32:
    std::memcpy(to, in, n * sizeof(float));
    return;
  case DType::F16:
    narrowToHalves(in, static_cast<uint16_t *>(to), n);
    return;
  case DType::BF16:
    narrowToBfloat16s(in, static_cast<uint16_t *>(to), n);
    return;
  case DType::I32:
    for (int64_t i = 0; i < n; ++i) {
      static_cast<int32_t *>(to)[i] = static_cast<int32_t>(in[i]);
    }
    return;
  case DType::I8: // rounded to nearest even, saturated (NaN -> 0)
    for (int64_t i = 0; i < n; ++i) {
      float value = std::nearbyint(in[i]);
      static_cast<int8_t *>(to)[i] = static_cast<int8_t>(
          value != value ? 0.0f : std::clamp(value, -128.0f, 127.0f));
    }
    return;
  }
}

void Tensor::loadFloats(float *out) const {
  toFloats(dtype_, data(), out, numElements());
}

void Tensor::storeFloats(const float *in) {
  fromFloats(dtype_, in, data(), numElements());
}

void mfrt::quantizedRowToFloats(const int8_t *row, int64_t k, int64_t bits,
                                float *out) {
  if (bits == 8) {
    for (int64_t j = 0; j < k; ++j) {
      out[j] = static_cast<float>(row[j]);
    }
    return;
  }
  for (int64_t j = 0; j < k / 2; ++j) {
    // Arithmetic shifts sign-extend each nibble.
    int8_t byte = row[j];
    out[2 * j] = static_cast<float>(
        static_cast<int8_t>(static_cast<uint8_t>(byte) << 4) >> 4);
    out[2 * j + 1] = static_cast<float>(byte >> 4);
  }
}
