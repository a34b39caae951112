//===- MoeKernels.h - eager kernels of the mixture of experts ---*- C++ -*-===//
//
// Internal to the kernel library: runKernel dispatches mf.top_k,
// mf.moe_route, mf.moe_dispatch, mf.grouped_matmul and mf.moe_combine here.
// The loader has checked their types with shapes/ShapeRules.h; what only
// the values can break (an expert index, a position, an offset out of
// range) is checked here, before any memory is touched.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_KERNELS_MOEKERNELS_H
#define MFC_RUNTIME_KERNELS_MOEKERNELS_H

#include "runtime/kernels/Kernels.h"

namespace mfrt::detail {

Status topK(const fb::Op &op, const Tensor &input, Tensor &values,
            Tensor &indices, const ParallelFor &parallel);
Status moeRoute(const fb::Op &op, const Tensor &indices, Tensor &positions,
                Tensor &offsets);
Status moeDispatch(const fb::Op &op, const std::vector<const Tensor *> &inputs,
                   Tensor &out);
Status groupedMatmul(const fb::Op &op,
                     const std::vector<const Tensor *> &inputs, Tensor &out,
                     const ParallelFor &parallel);
Status topKGrad(const fb::Op &op, const Tensor &gradient, const Tensor &indices,
                Tensor &out);
Status groupedMatmulWeightGrad(const fb::Op &op, const Tensor &gradient,
                               const Tensor &rows, const Tensor &offsets,
                               Tensor &out);
Status moeWeightsGrad(const fb::Op &op, const Tensor &gradient,
                      const Tensor &rows, const Tensor &positions, Tensor &out,
                      const ParallelFor &parallel);
Status moeCombine(const fb::Op &op, const Tensor &rows, const Tensor &positions,
                  const Tensor &weights, Tensor &out,
                  const ParallelFor &parallel);

} // namespace mfrt::detail

#endif // MFC_RUNTIME_KERNELS_MOEKERNELS_H
