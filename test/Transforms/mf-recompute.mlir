// RUN: mf-opt %s --pass-pipeline='builtin.module(mf-autodiff,func.func(mf-recompute{select=feed_forward\.mul}))' | FileCheck %s --check-prefix=SELECT
// Canonicalization and CSE after recompute must not merge the clone with its
// original (that would keep the activation alive again: the classic bug).
// RUN: mf-opt %s --pass-pipeline='builtin.module(mf-autodiff,func.func(mf-recompute{select=feed_forward\.mul}),canonicalize,cse)' | FileCheck %s --check-prefix=SELECT
// RUN: mf-opt %s --pass-pipeline='builtin.module(mf-autodiff,func.func(mf-recompute{full=model.layers.0}))' | FileCheck %s --check-prefix=FULL
// RUN: mf-opt %s --pass-pipeline='builtin.module(mf-autodiff,func.func(mf-recompute{select=model.layers.1:feed_forward\.mul}))' | FileCheck %s --check-prefix=OTHER
// Levels match the path's names within its layer from the first, as
// MindFormers walks a layer's cells: feed_forward.w1.activation.silu selects
// the silu, not feed_forward.mul; w1.activation.silu names nothing.
// RUN: mf-opt %s --pass-pipeline='builtin.module(mf-autodiff,func.func(mf-recompute{select=feed_forward\.w1\.activation\.silu}))' | FileCheck %s --check-prefix=SILU
// RUN: mf-opt %s --pass-pipeline='builtin.module(mf-autodiff,func.func(mf-recompute{select=w1\.activation\.silu}))' | FileCheck %s --check-prefix=OTHER
// A pattern naming a cell selects every op in it (not the layer's output).
// RUN: mf-opt %s --pass-pipeline='builtin.module(mf-autodiff,func.func(mf-recompute{select=feed_forward}))' | FileCheck %s --check-prefix=CELL
// Exclusions win over everything, full recompute included; they name ops
// (the whole path): the silu is kept, the rest of the layer recomputed.
// RUN: mf-opt %s --pass-pipeline='builtin.module(mf-autodiff,func.func(mf-recompute{full=model.layers.0 exclude=feed_forward\.w1\.activation\.silu}))' | FileCheck %s --check-prefix=EXCLUDE
// RUN: mf-opt %s --pass-pipeline='builtin.module(mf-autodiff,func.func(mf-recompute{select=feed_forward\.mul exclude=model.layers.0:feed_forward\.mul}))' | FileCheck %s --check-prefix=OTHER
// RUN: mf-opt %s --pass-pipeline='builtin.module(mf-autodiff,func.func(mf-recompute{select=feed_forward\.mul exclude=model.layers.1:feed_forward\.mul}))' | FileCheck %s --check-prefix=SELECT
// select-comm (select_comm_recompute) recomputes only all-gathers: the
// matched cell's other ops are kept (test/Frontend/recompute.test and
// test/e2e/tensor-parallel-train.test recompute sequence parallelism's).
// RUN: mf-opt %s --pass-pipeline='builtin.module(mf-autodiff,func.func(mf-recompute{select-comm=feed_forward}))' | FileCheck %s --check-prefix=OTHER
// An op with a fused<"model-paths"> location answers to each of its names.
// RUN: mf-opt %s --pass-pipeline='builtin.module(mf-autodiff,func.func(mf-recompute{select=feed_forward\.gate}))' | FileCheck %s --check-prefix=ALIAS
// After fusion the barriers go; the clone stays.
// RUN: mf-opt %s --pass-pipeline='builtin.module(mf-autodiff,func.func(mf-recompute{select=feed_forward\.mul},mf-drop-recompute-barriers))' | FileCheck %s --check-prefix=DROPPED
// RUN: not mf-opt %s --pass-pipeline='builtin.module(mf-autodiff,func.func(mf-recompute{select=feed_forward\.(}))' 2>&1 | FileCheck %s --check-prefix=BAD

// One layer: g = w1 * w1, u = w3 + w1, h = silu(g) * u (feed_forward.mul),
// o = h w2^T + w1 (the layer's output), then the loss. The backward of the
// w2 product reads h.
// SELECT-LABEL: func.func @forward_backward
// SELECT: %[[ACT:.+]] = mf.silu %{{.*}} : tensor<4x8xf32>
// SELECT: %[[H:.+]] = mf.mul %[[ACT]], %[[UP:[^ ]+]] : tensor<4x8xf32>
// SELECT: mf.cross_entropy_grad
// SELECT: %[[KEPT_ACT:.+]] = mf.recompute_barrier %[[ACT]] : tensor<4x8xf32>
// SELECT: %[[KEPT_UP:.+]] = mf.recompute_barrier %[[UP]] : tensor<4x8xf32>
// SELECT: %[[AGAIN:.+]] = mf.mul %[[KEPT_ACT]], %[[KEPT_UP]] {mf.recomputed} : tensor<4x8xf32>
// SELECT-NOT: transpose_lhs
// SELECT: mf.matmul %{{.*}}, %[[AGAIN]] transpose_lhs

// The whole layer but its output, from what enters it (parameters).
// FULL-LABEL: func.func @forward_backward
// FULL: mf.cross_entropy_grad
// FULL-DAG: mf.mul %{{.*}}, %{{.*}} {mf.recomputed}
// FULL-DAG: mf.add %{{.*}}, %{{.*}} {mf.recomputed}
// FULL-DAG: mf.silu %{{.*}} {mf.recomputed}
// FULL: mf.silu_grad

// OTHER-LABEL: func.func @forward_backward
// OTHER-NOT: mf.recompute

// SILU-LABEL: func.func @forward_backward
// SILU: mf.cross_entropy_grad
// SILU: mf.silu %{{.*}} {mf.recomputed}
// SILU-NOT: mf.mul {{.*}} {mf.recomputed}

// CELL-LABEL: func.func @forward_backward
// CELL: mf.cross_entropy_grad
// CELL-DAG: mf.mul %{{.*}}, %{{.*}} {mf.recomputed}
// CELL-DAG: mf.silu %{{.*}} {mf.recomputed}
// CELL-DAG: mf.add %{{.*}}, %{{.*}} {mf.recomputed}
// CELL-NOT: mf.matmul {{.*}} {mf.recomputed}

// EXCLUDE-LABEL: func.func @forward_backward
// EXCLUDE: mf.cross_entropy_grad
// EXCLUDE-NOT: mf.silu %{{.*}} {mf.recomputed}
// EXCLUDE: mf.mul %{{.*}}, %{{.*}} {mf.recomputed}
// EXCLUDE-NOT: mf.silu %{{.*}} {mf.recomputed}

// ALIAS-LABEL: func.func @forward_backward
// ALIAS: mf.cross_entropy_grad
// ALIAS: mf.mul %{{.*}}, %{{.*}} {mf.recomputed}

// DROPPED-LABEL: func.func @forward_backward
// DROPPED-NOT: mf.recompute_barrier
// DROPPED: mf.mul %{{.*}}, %{{.*}} {mf.recomputed}

// BAD: error: mf-recompute: invalid select pattern 'feed_forward\.(': parentheses not balanced
module attributes {mf.run_mode = #mf.run_mode<train>} {
  mf.parameter @w1 : tensor<4x8xf32> init = normal {std = 2.000000e-02 : f64}
  mf.parameter @w3 : tensor<4x8xf32> init = normal {std = 2.000000e-02 : f64}
  mf.parameter @w2 : tensor<8x8xf32> init = normal {std = 2.000000e-02 : f64}
  func.func @forward_loss(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
    %w1 = mf.param @w1 : tensor<4x8xf32> loc("model.layers.0.feed_forward.w1")
    %w3 = mf.param @w3 : tensor<4x8xf32> loc("model.layers.0.feed_forward.w3")
    %w2 = mf.param @w2 : tensor<8x8xf32> loc("model.layers.0.feed_forward.w2")
    %g = mf.mul %w1, %w1 : tensor<4x8xf32> loc("model.layers.0.feed_forward.w1")
    %u = mf.add %w3, %w1 : tensor<4x8xf32> loc("model.layers.0.feed_forward.w3")
    %a = mf.silu %g : tensor<4x8xf32> loc("model.layers.0.feed_forward.w1.activation.silu")
    %h = mf.mul %a, %u : tensor<4x8xf32> loc(fused<"model-paths">["model.layers.0.feed_forward.mul", "model.layers.0.feed_forward.gate"])
    %d = mf.matmul %h, %w2 transpose_rhs : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32> loc("model.layers.0.feed_forward.w2")
    %o = mf.add %d, %w1 : tensor<4x8xf32> loc("model.layers.0.ffn_add")
    %flat = mf.reshape %labels : tensor<1x4xi32> to tensor<4xi32> loc("loss")
    %loss = mf.cross_entropy %o, %flat ignore_index = -100 : tensor<4x8xf32>, tensor<4xi32> -> tensor<f32> loc("loss")
    return %loss : tensor<f32>
  }
}
