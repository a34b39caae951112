//===- KernelSupport.h - what the eager kernels share -----------*- C++ -*-===//
//
// Internal to the kernel library (Kernels.cpp, GradientKernels.cpp,
// MoeKernels.cpp): fp32 views of tensors of any float dtype, shape errors
// that name the op, and the vectorized loops several kernels use.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_KERNELS_KERNELSUPPORT_H
#define MFC_RUNTIME_KERNELS_KERNELSUPPORT_H

#include "runtime/base/Status.h"
#include "runtime/base/Tensor.h"
#include "runtime/format/Executable.h"
#include "runtime/kernels/Kernels.h"

#include <vector>

namespace mfrt::detail {

//===----------------------------------------------------------------------===//
// fp32 views of tensors of any float dtype
//===----------------------------------------------------------------------===//

/// The elements of a tensor as floats: the tensor's own memory when it is
/// f32, a converted copy otherwise.
class F32In {
public:
  explicit F32In(const Tensor &tensor) {
    if (tensor.dtype() == DType::F32) {
      data_ = tensor.as<float>();
      return;
    }
    copy_.resize(tensor.numElements());
    tensor.loadFloats(copy_.data());
    data_ = copy_.data();
  }
  const float *data() const { return data_; }
  float operator[](int64_t i) const { return data_[i]; }

private:
  const float *data_;
  std::vector<float> copy_;
};

/// Float storage for a result; converted into the tensor on finish().
class F32Out {
public:
  explicit F32Out(Tensor &tensor) : tensor_(tensor) {
    if (tensor.dtype() == DType::F32) {
      data_ = tensor.as<float>();
    } else {
      copy_.assign(tensor.numElements(), 0.0f);
      data_ = copy_.data();
    }
  }
  float *data() { return data_; }
  float &operator[](int64_t i) { return data_[i]; }
  void finish() {
    if (tensor_.dtype() != DType::F32) {
      tensor_.storeFloats(copy_.data());
    }
  }

private:
  Tensor &tensor_;
  float *data_;
  std::vector<float> copy_;
};

inline Status shapeError(const fb::Op &op, const std::string &message) {
  std::string where = fb::EnumNameOpKind(op.kind());
  if (op.location() && op.location()->size()) {
    where += " at " + op.location()->str();
  }
  return Status::error(where + ": " + message);
}

inline Status expectShape(const fb::Op &op, const Tensor &tensor,
                          const Shape &shape, const char *what) {
  if (tensor.shape() != shape) {
    return shapeError(op, std::string(what) + " has shape " +
                              formatShape(tensor.shape()) + ", expected " +
                              formatShape(shape));
  }
  return Status::ok();
}

inline Status expectSameShape(const fb::Op &op, const Tensor &a,
                              const Tensor &b) {
  return expectShape(op, a, b.shape(), "an operand");
}

inline bool isFloat(DType type) { return type != DType::I32; }

/// Splits `shape` around `dim` into (outer, size, inner) element counts.
struct Split {
  int64_t outer = 1, size = 1, inner = 1;
};
inline Split splitAt(const Shape &shape, int64_t dim) {
  Split split;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    if (i < dim) {
      split.outer *= shape[i];
    } else if (i == dim) {
      split.size = shape[i];
    } else {
      split.inner *= shape[i];
    }
  }
  return split;
}

template <typename F>
Status binary(const fb::Op &op, const Tensor &a, const Tensor &b, Tensor &out,
              F function) {
  MFRT_RETURN_IF_ERROR(expectSameShape(op, a, out));
  MFRT_RETURN_IF_ERROR(expectSameShape(op, b, out));
  if (a.dtype() != out.dtype() || b.dtype() != out.dtype()) {
    return shapeError(op, "operand and result dtypes differ");
  }
  int64_t n = out.numElements();
  if (out.dtype() == DType::I32) {
    const int32_t *x = a.as<int32_t>(), *y = b.as<int32_t>();
    int32_t *z = out.as<int32_t>();
    for (int64_t i = 0; i < n; ++i) {
      z[i] = static_cast<int32_t>(
          function(static_cast<float>(x[i]), static_cast<float>(y[i])));
    }
    return Status::ok();
  }
  F32In x(a), y(b);
  F32Out z(out);
  for (int64_t i = 0; i < n; ++i) {
    z[i] = function(x[i], y[i]);
  }
  z.finish();
  return Status::ok();
}

/// Row-major strides of `shape`, in elements.
std::vector<int64_t> rowMajorStrides(const Shape &shape);

/// Calls visit(i, offset) for every element i (row-major) of `shape`, with
/// offset = base + sum(index_d * strides[d]): the walk behind gathers
/// (broadcast, transpose, slice) and the pad scatter.
template <typename F>
void walkStrided(const Shape &shape, const std::vector<int64_t> &strides,
                 int64_t base, F visit) {
  size_t rank = shape.size();
  int64_t count = 1;
  for (int64_t size : shape) {
    count *= size;
  }
  std::vector<int64_t> index(rank, 0);
  for (int64_t i = 0; i < count; ++i) {
    int64_t offset = base;
    for (size_t d = 0; d < rank; ++d) {
      offset += index[d] * strides[d];
    }
    visit(i, offset);
    for (int64_t d = static_cast<int64_t>(rank) - 1; d >= 0; --d) {
      if (++index[d] < shape[d]) {
        break;
      }
      index[d] = 0;
    }
  }
}

/// An error naming the first label outside [0, vocab) that is not `ignore`.
Status checkLabels(const fb::Op &op, const Tensor &labels, int64_t vocab,
                   int64_t ignore);

/// `block`'s whole vocabulary for a block of `rows` ids (an error when the
/// block does not lie in it), and its rows' offset in it.
StatusOr<int64_t> wholeVocabulary(const fb::Op &op,
                                  const VocabularyBlock &block, int64_t rows);

/// `values` combined over the ranks of `block` (unchanged on one rank).
Status combine(const VocabularyBlock &block, std::vector<double> &values,
               VocabularyBlock::Combine how);

// The loops below are built for the widest vector ISA the machine has
// (target clones, chosen at load time, private to Kernels.cpp: GCC's
// resolvers in other translation units would reference local clones).

/// a . b over `n` floats, in eight partial sums (so it vectorizes).
float dotProduct(const float *a, const float *b, int64_t n);

/// y += alpha * x over `n` floats.
void scaledAdd(float *y, const float *x, float alpha, int64_t n);

/// sum((x[i] - mean)^2) over `n` floats, accumulated in double (eight
/// partial sums, so it vectorizes). With mean 0, the sum of squares.
double squaredDeviations(const float *x, int64_t n, double mean);

/// sum(x[i]) over `n` floats, accumulated in double.
double sumOf(const float *x, int64_t n);

/// x[i] = exp(x[i] - shift) over `n` floats, each x[i] <= shift (softmax's
/// rows after their maximum); returns the sum, accumulated in double. A
/// branch-free polynomial exp (Cephes' expf: within 2 ulp of std::exp) so
/// the loop vectorizes.
double expShiftedSum(float *x, int64_t n, float shift);

/// The largest of `n` >= 1 floats (none NaN).
float maximumOf(const float *x, int64_t n);

/// out[i] = in[i] * factor over `n` floats (`out` may be `in`).
void scaleInto(const float *in, float factor, float *out, int64_t n);

} // namespace mfrt::detail

#endif // MFC_RUNTIME_KERNELS_KERNELSUPPORT_H
