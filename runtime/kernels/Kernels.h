//===- Kernels.h - the eager kernel library ---------------------*- C++ -*-===//
//
// One kernel per op kind of the executable. Math is fp32; tensors may be
// stored as f32, f16 or bf16 (converted on the way in and out). Each kernel
// checks the shapes of its operands against its result before touching
// memory, so a malformed executable is an error, never an overrun.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_KERNELS_KERNELS_H
#define MFC_RUNTIME_KERNELS_KERNELS_H

#include "runtime/base/Status.h"
#include "runtime/base/Tensor.h"
#include "runtime/format/Executable.h"

#include <functional>
#include <vector>

namespace mfrt {

/// Runs body(begin, end) over disjoint ranges covering [0, count), possibly
/// on several threads at once; returns when all are done.
using ParallelFor = std::function<void(
    int64_t count, const std::function<void(int64_t, int64_t)> &body)>;

/// One range, on the calling thread.
void runSerially(int64_t count,
                 const std::function<void(int64_t, int64_t)> &body);

/// Where a vocabulary-parallel op's block (Embedding, EmbeddingGrad,
/// CrossEntropy, CrossEntropyGrad with grid axes) sits in the whole
/// vocabulary, and how its rank combines per-token numbers with the ranks
/// that hold the other blocks. The default is a whole vocabulary.
struct VocabularyBlock {
  enum class Combine { Max, Sum };
  int64_t first = 0;      ///< the block's first id
  int64_t vocabulary = 0; ///< the whole vocabulary; 0: the block's rows
  /// Replaces `values` by their elementwise max or sum over the ranks;
  /// none: one rank.
  std::function<Status(double *values, int64_t count, Combine how)> combine;
};

/// Computes `op` from `inputs` into `outputs`, one per result, which the
/// caller allocated with the results' types (KvCacheWrite may receive its
/// cache operand's storage as its output, to update in place). Param is not
/// a kernel. Kernels with independent tiles (attention) spread them with
/// `parallel`.
Status runKernel(const fb::Op &op, const std::vector<const Tensor *> &inputs,
                 const std::vector<Tensor *> &outputs,
                 const ParallelFor &parallel = runSerially,
                 const VocabularyBlock &block = {});

} // namespace mfrt

#endif // MFC_RUNTIME_KERNELS_KERNELS_H
