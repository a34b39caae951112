// RUN: mf-opt %s --mf-print-cost -o /dev/null | FileCheck %s
// RUN: mf-opt %s --mf-print-cost=per-op -o /dev/null | FileCheck %s --check-prefix=PEROP

// 2 * 8 * 128 * 64 = 131072 FLOPs for the matmul; 4 * 8 * 64 for the norm.
// CHECK: parameters: 8256 values, 0.03 MB
// CHECK: entry @forward: 3 ops, 0.0001331 GFLOP, 0.04326 MB moved
// CHECK: mf.param        1        0         0
// CHECK: mf.rms_norm     1     2048      4352
// CHECK: mf.matmul       1   131072     38912
// PEROP: every op (kind, FLOP, bytes, model path):
// PEROP: mf.matmul 131072 38912 model.layers.0.attention.wq

mf.parameter @w : tensor<128x64xf32> init = normal {std = 2.000000e-02 : f64}
mf.parameter @g : tensor<64xf32> init = ones
func.func @forward(%x: tensor<1x8x64xf32>, %g: tensor<64xf32>) -> tensor<1x8x128xf32> {
  %w = mf.param @w : tensor<128x64xf32>
  %n = mf.rms_norm %x, %g eps = 1.0e-05 : tensor<1x8x64xf32>, tensor<64xf32> loc("model.layers.0.attention_norm")
  %y = mf.matmul %n, %w transpose_rhs : tensor<1x8x64xf32>, tensor<128x64xf32> -> tensor<1x8x128xf32> loc("model.layers.0.attention.wq")
  return %y : tensor<1x8x128xf32>
}
