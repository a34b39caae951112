// RUN: mf-opt %s --mf-quantize-weights | FileCheck %s
// RUN: mf-opt %s --mf-quantize-weights="exclude=lm_head" | FileCheck %s --check-prefix=EXCLUDED
// EXCLUDED: mf.parameter @tied : tensor<16x8xf32>
// EXCLUDED-NOT: mf.dequantize

// A tied table (looked up and multiplied by): quantized, its lookups read
// the i8 rows and their scales. With exclude=lm_head it stays float: the
// table is the lm_head.
// CHECK: mf.parameter @tied : tensor<16x8xi8> init = normal quantized(@tied_scale)
// CHECK-LABEL: func.func @tied_table
// CHECK: %[[Q:.*]] = mf.param @tied : tensor<16x8xi8>
// CHECK: %[[S:.*]] = mf.param @tied_scale : tensor<16xf32>
// CHECK: %[[W:.*]] = mf.dequantize %[[Q]], %[[S]]
// CHECK: %[[ROWS:.*]] = mf.embedding %[[Q]], %{{.*}} : tensor<16x8xi8>, tensor<2xi32> -> tensor<2x8xi8>
// CHECK: %[[COLUMN:.*]] = mf.reshape %[[S]] : tensor<16xf32> to tensor<16x1xf32>
// CHECK: %[[RS:.*]] = mf.embedding %[[COLUMN]], %{{.*}} : tensor<16x1xf32>, tensor<2xi32> -> tensor<2x1xf32>
// CHECK: %[[F:.*]] = mf.cast %[[ROWS]] : tensor<2x8xi8> to tensor<2x8xf32>
// CHECK: %[[B:.*]] = mf.broadcast %[[RS]] : tensor<2x1xf32> to tensor<2x8xf32>
// CHECK: mf.mul %[[F]], %[[B]] : tensor<2x8xf32>
// CHECK: mf.matmul %{{.*}}, %[[W]] transpose_rhs
mf.parameter @tied : tensor<16x8xf32> init = normal {std = 2.000000e-02 : f64}
func.func @tied_table(%ids: tensor<2xi32>) -> tensor<2x16xf32> {
  %t = mf.param @tied : tensor<16x8xf32>
  %e = mf.embedding %t, %ids : tensor<16x8xf32>, tensor<2xi32> -> tensor<2x8xf32>
  %l = mf.matmul %e, %t transpose_rhs : tensor<2x8xf32>, tensor<16x8xf32> -> tensor<2x16xf32>
  return %l : tensor<2x16xf32>
}
