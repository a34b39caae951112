// RUN: mf-opt %s --pass-pipeline='builtin.module(func.func(mf-recompute))' | FileCheck %s

// A cast that widens a float (bf16 to f32) is exact: with no recompute
// options at all, the backward casts the kept bf16 value again instead of
// keeping the f32 copy (half the bytes). A narrowing cast is kept.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<4xbf16>
// CHECK: %[[WIDE:.*]] = mf.cast %[[X]] : tensor<4xbf16> to tensor<4xf32>
// CHECK: %[[NARROW:.*]] = mf.cast %{{.*}} : tensor<4xf32> to tensor<4xbf16>
// CHECK: %[[KEPT:.*]] = mf.recompute_barrier %[[X]] : tensor<4xbf16>
// CHECK: %[[AGAIN:.*]] = mf.cast %[[KEPT]] {mf.recomputed} : tensor<4xbf16> to tensor<4xf32>
// CHECK: mf.mul %{{.*}}, %[[AGAIN]] : tensor<4xf32>
// CHECK-NOT: mf.recomputed
// CHECK: return
module attributes {mf.run_mode = #mf.run_mode<train>} {
  func.func @forward_backward(%x: tensor<4xbf16> {mf.name = "input_ids"}) -> (tensor<f32> {mf.name = "loss"}, tensor<4xf32> {mf.name = "grad.w"}, tensor<4xbf16> {mf.name = "grad.v"}) {
    %c = mf.cast %x : tensor<4xbf16> to tensor<4xf32>
    %e = mf.exp %c : tensor<4xf32>
    %n = mf.cast %e : tensor<4xf32> to tensor<4xbf16>
    %m = mf.cast %n : tensor<4xbf16> to tensor<4xf32>
    %s = mf.reduce_sum %m dim = 0 : tensor<4xf32> -> tensor<1xf32>
    %l = mf.reshape %s : tensor<1xf32> to tensor<f32>
    %g = mf.mul %e, %c : tensor<4xf32>
    %h = mf.exp %n : tensor<4xbf16>
    return %l, %g, %h : tensor<f32>, tensor<4xf32>, tensor<4xbf16>
  }
}
