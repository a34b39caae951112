//===- GradientKernels.h - eager kernels of the gradient ops ----*- C++ -*-===//
//
// Internal to the kernel library: runKernel dispatches the gradient op
// kinds (mf-autodiff's ops) here.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_KERNELS_GRADIENTKERNELS_H
#define MFC_RUNTIME_KERNELS_GRADIENTKERNELS_H

#include "runtime/kernels/Kernels.h"

namespace mfrt::detail {

Status siluGrad(const fb::Op &op, const Tensor &x, const Tensor &dy,
                Tensor &out);
Status geluGrad(const fb::Op &op, const Tensor &x, const Tensor &dy,
                Tensor &out);
Status embeddingGrad(const fb::Op &op, const Tensor &ids, const Tensor &dy,
                     Tensor &out, const VocabularyBlock &block);
Status normGrad(const fb::Op &op, const std::vector<const Tensor *> &inputs,
                Tensor &out, bool layerNorm);
Status attentionGrad(const fb::Op &op,
                     const std::vector<const Tensor *> &inputs, Tensor &out,
                     const ParallelFor &parallel);
Status crossEntropyGrad(const fb::Op &op, const Tensor &logits,
                        const Tensor &labels, const Tensor &dloss, Tensor &out,
                        const ParallelFor &parallel,
                        const VocabularyBlock &block);
Status pad(const fb::Op &op, const Tensor &a, Tensor &out);

} // namespace mfrt::detail

#endif // MFC_RUNTIME_KERNELS_GRADIENTKERNELS_H
