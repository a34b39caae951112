// RUN: mf-opt %s --split-input-file --mf-quantize-weights="exclude=lm_head" --verify-diagnostics | FileCheck %s

// A Linear weight (only multiplied by transposed) becomes i8 values and
// per-row scales of the type it is multiplied in; its reads become
// mf.dequantize. Excluded names, weights read otherwise (a gather) and
// weights multiplied untransposed stay float.
// CHECK: mf.parameter @w : tensor<16x8xi8> init = normal quantized(@w_scale) {mf_name = "layers.0.attention.wq.weight", std = 2.000000e-02 : f64}
// CHECK-NEXT: mf.parameter @w_scale : tensor<16xf32> init = ones {mf_name = "layers.0.attention.wq._weight_quantizer.scale"}
// CHECK-NEXT: mf.parameter @lm_head.weight : tensor<16x8xf32>
// CHECK-NEXT: mf.parameter @table : tensor<16x8xf32>
// CHECK-NEXT: mf.parameter @kn : tensor<8x16xf32>
// CHECK-LABEL: func.func @linear
// CHECK: %[[Q:.*]] = mf.param @w : tensor<16x8xi8>
// CHECK: %[[S:.*]] = mf.param @w_scale : tensor<16xf32>
// CHECK: %[[W:.*]] = mf.dequantize %[[Q]], %[[S]] : tensor<16x8xi8>, tensor<16xf32> -> tensor<16x8xf32>
// CHECK: mf.matmul %{{.*}}, %[[W]] transpose_rhs
mf.parameter @w : tensor<16x8xf32> init = normal {mf_name = "layers.0.attention.wq.weight", std = 2.000000e-02 : f64}
mf.parameter @lm_head.weight : tensor<16x8xf32> init = normal {std = 2.000000e-02 : f64}
mf.parameter @table : tensor<16x8xf32> init = normal {std = 2.000000e-02 : f64}
mf.parameter @kn : tensor<8x16xf32> init = normal {std = 2.000000e-02 : f64}
func.func @linear(%x: tensor<2x8xf32>, %ids: tensor<2xi32>) -> (tensor<2x16xf32>, tensor<2x16xf32>, tensor<2x16xf32>, tensor<2x8xf32>, tensor<2x16xf32>) {
  %w = mf.param @w : tensor<16x8xf32>
  %y = mf.matmul %x, %w transpose_rhs : tensor<2x8xf32>, tensor<16x8xf32> -> tensor<2x16xf32>
  %h = mf.param @lm_head.weight : tensor<16x8xf32>
  %l = mf.matmul %x, %h transpose_rhs : tensor<2x8xf32>, tensor<16x8xf32> -> tensor<2x16xf32>
  %t = mf.param @table : tensor<16x8xf32>
  %e = mf.embedding %t, %ids : tensor<16x8xf32>, tensor<2xi32> -> tensor<2x8xf32>
  %u = mf.matmul %x, %t transpose_rhs : tensor<2x8xf32>, tensor<16x8xf32> -> tensor<2x16xf32>
  %k = mf.param @kn : tensor<8x16xf32>
  %v = mf.matmul %x, %k : tensor<2x8xf32>, tensor<8x16xf32> -> tensor<2x16xf32>
  return %y, %l, %u, %e, %v : tensor<2x16xf32>, tensor<2x16xf32>, tensor<2x16xf32>, tensor<2x8xf32>, tensor<2x16xf32>
}

// -----

// A weight cast to the compute dtype first: its scales are in that dtype
// (as MindFormers keeps them) and the dequantization replaces the cast.
// CHECK: mf.parameter @w : tensor<16x8xi8> init = normal quantized(@w_scale)
// CHECK-NEXT: mf.parameter @w_scale : tensor<16xf16> init = ones
// CHECK-LABEL: func.func @cast_first
// CHECK: %[[W:.*]] = mf.dequantize %{{.*}}, %{{.*}} : tensor<16x8xi8>, tensor<16xf16> -> tensor<16x8xf16>
// CHECK-NOT: mf.cast
// CHECK: mf.matmul %{{.*}}, %[[W]] transpose_rhs
mf.parameter @w : tensor<16x8xf32> init = normal {std = 2.000000e-02 : f64}
func.func @cast_first(%x: tensor<2x8xf16>) -> tensor<2x16xf16> {
  %w = mf.param @w : tensor<16x8xf32>
  %c = mf.cast %w : tensor<16x8xf32> to tensor<16x8xf16>
  %y = mf.matmul %x, %c transpose_rhs : tensor<2x8xf16>, tensor<16x8xf16> -> tensor<2x16xf16>
  return %y : tensor<2x16xf16>
}

// -----

// Training updates the weights: refused.
// expected-error @+1 {{mf-quantize-weights: the module updates its parameters (training); quantized weights are for inference}}
module {
  mf.parameter @w : tensor<4xf32> init = ones
  func.func @step(%x: tensor<4xf32>) -> tensor<4xf32> {
    %a = mf.assign @w, %x : tensor<4xf32>
    return %a : tensor<4xf32>
  }
}

