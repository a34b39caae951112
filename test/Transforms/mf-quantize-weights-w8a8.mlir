// RUN: mf-opt %s --split-input-file --mf-quantize-weights="activations=per-token exclude=lm_head" | FileCheck %s
// RUN: mf-opt %s --split-input-file --mf-quantize-weights="activations=per-token exclude=lm_head" --mf-fuse-elementwise --mf-outline-lone-matmuls | FileCheck %s --check-prefix=FUSED

// W8A8: each product by a quantized weight multiplies rows quantized per
// token, one mf.dynamic_quantize per distinct operand (q and k share it);
// a float weight's product (lm_head, excluded) keeps its float rows.
// CHECK-LABEL: func.func @rows
// CHECK: %[[Q:.*]], %[[S:.*]] = mf.dynamic_quantize %arg0 : tensor<1x4x8xf32> -> tensor<1x4x8xi8>, tensor<1x4xf32>
// CHECK-NEXT: %[[R:.*]] = mf.dequantize %[[Q]], %[[S]] : tensor<1x4x8xi8>, tensor<1x4xf32> -> tensor<1x4x8xf32>
// CHECK: mf.matmul %[[R]], %{{.*}} transpose_rhs
// CHECK: mf.matmul %[[R]], %{{.*}} transpose_rhs
// CHECK-NOT: mf.dynamic_quantize
// CHECK: mf.matmul %arg0, %{{.*}} transpose_rhs : tensor<1x4x8xf32>, tensor<16x8xf32>
// The region quantizes its rows itself: it reads the float rows.
// FUSED-LABEL: func.func @rows
// FUSED: mf.fusion matmul(%arg0, %{{.*}}, %{{.*}}) : (tensor<1x4x8xf32>, tensor<16x8xi8>, tensor<16xf32>)
// FUSED: mf.dynamic_quantize
// FUSED: mf.dequantize
mf.parameter @q : tensor<16x8xf32> init = normal {std = 2.000000e-02 : f64}
mf.parameter @k : tensor<16x8xf32> init = normal {std = 2.000000e-02 : f64}
mf.parameter @lm_head.weight : tensor<16x8xf32> init = normal {std = 2.000000e-02 : f64}
func.func @rows(%x: tensor<1x4x8xf32>) -> (tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) {
  %q = mf.param @q : tensor<16x8xf32>
  %y = mf.matmul %x, %q transpose_rhs : tensor<1x4x8xf32>, tensor<16x8xf32> -> tensor<1x4x16xf32>
  %k = mf.param @k : tensor<16x8xf32>
  %z = mf.matmul %x, %k transpose_rhs : tensor<1x4x8xf32>, tensor<16x8xf32> -> tensor<1x4x16xf32>
  %h = mf.param @lm_head.weight : tensor<16x8xf32>
  %l = mf.matmul %x, %h transpose_rhs : tensor<1x4x8xf32>, tensor<16x8xf32> -> tensor<1x4x16xf32>
  return %y, %z, %l : tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>
}
