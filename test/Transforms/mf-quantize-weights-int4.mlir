// RUN: mf-opt %s --split-input-file --mf-quantize-weights="bits=4 group-size=4" -verify-diagnostics | FileCheck %s

// int4 weights: two values a byte (i8 [N, K / 2]) with scales per group of
// 4 columns, [K / 4, N]; mf.dequantize reads both.
// CHECK: mf.parameter @w : tensor<6x4xi8> init = normal quantized(@w_scale group = 4 bits = 4)
// CHECK-NEXT: mf.parameter @w_scale : tensor<2x6xf32> init = ones
// CHECK-LABEL: func.func @linear
// CHECK: %[[Q:.*]] = mf.param @w : tensor<6x4xi8>
// CHECK: %[[S:.*]] = mf.param @w_scale : tensor<2x6xf32>
// CHECK: %[[W:.*]] = mf.dequantize %[[Q]], %[[S]] group_size = 4 bits = 4 : tensor<6x4xi8>, tensor<2x6xf32> -> tensor<6x8xf32>
// CHECK: mf.matmul %{{.*}}, %[[W]] transpose_rhs
mf.parameter @w : tensor<6x8xf32> init = normal {std = 2.000000e-02 : f64}
func.func @linear(%x: tensor<3x8xf32>) -> tensor<3x6xf32> {
  %w = mf.param @w : tensor<6x8xf32>
  %y = mf.matmul %x, %w transpose_rhs : tensor<3x8xf32>, tensor<6x8xf32> -> tensor<3x6xf32>
  return %y : tensor<3x6xf32>
}

// -----

// A tied int4 table's lookups read the rows of bytes (the ids as one list)
// and their scales through the scales transposed ([V, K / 4], derived once
// from the weights), transposed back, dequantized, shaped as the lookup.
// CHECK-LABEL: func.func @tied_table
// CHECK: %[[Q:.*]] = mf.param @tied : tensor<16x4xi8>
// CHECK: %[[S:.*]] = mf.param @tied_scale : tensor<2x16xf32>
// CHECK: %[[W:.*]] = mf.dequantize %[[Q]], %[[S]] group_size = 4 bits = 4
// CHECK: %[[IDS:.*]] = mf.reshape %{{.*}} : tensor<1x2xi32> to tensor<2xi32>
// CHECK: %[[ROWS:.*]] = mf.embedding %[[Q]], %[[IDS]] : tensor<16x4xi8>, tensor<2xi32> -> tensor<2x4xi8>
// CHECK: %[[BYROW:.*]] = mf.transpose %[[S]] [1, 0] : tensor<2x16xf32> -> tensor<16x2xf32>
// CHECK: %[[RS:.*]] = mf.embedding %[[BYROW]], %[[IDS]] : tensor<16x2xf32>, tensor<2xi32> -> tensor<2x2xf32>
// CHECK: %[[RST:.*]] = mf.transpose %[[RS]] [1, 0] : tensor<2x2xf32> -> tensor<2x2xf32>
// CHECK: %[[F:.*]] = mf.dequantize %[[ROWS]], %[[RST]] group_size = 4 bits = 4 : tensor<2x4xi8>, tensor<2x2xf32> -> tensor<2x8xf32>
// CHECK: mf.reshape %[[F]] : tensor<2x8xf32> to tensor<1x2x8xf32>
// CHECK: mf.matmul %{{.*}}, %[[W]] transpose_rhs
mf.parameter @tied : tensor<16x8xf32> init = normal {std = 2.000000e-02 : f64}
func.func @tied_table(%ids: tensor<1x2xi32>) -> tensor<1x2x16xf32> {
  %t = mf.param @tied : tensor<16x8xf32>
  %e = mf.embedding %t, %ids : tensor<16x8xf32>, tensor<1x2xi32> -> tensor<1x2x8xf32>
  %l = mf.matmul %e, %t transpose_rhs : tensor<1x2x8xf32>, tensor<16x8xf32> -> tensor<1x2x16xf32>
  return %l : tensor<1x2x16xf32>
}

// -----

// A K that the groups do not divide is an error at the weight.
// expected-error @+1 {{mf-quantize-weights: K = 6 of this [4, 6] weight is not a multiple of the group size 4; choose a group_size that divides it or add the layer to modules_to_not_convert}}
mf.parameter @w : tensor<4x6xf32> init = normal {std = 2.000000e-02 : f64}
func.func @linear(%x: tensor<3x6xf32>) -> tensor<3x4xf32> {
  %w = mf.param @w : tensor<4x6xf32>
  %y = mf.matmul %x, %w transpose_rhs : tensor<3x6xf32>, tensor<4x6xf32> -> tensor<3x4xf32>
  return %y : tensor<3x4xf32>
}
