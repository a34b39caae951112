// RUN: mf-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(mf-fuse-elementwise,mf-fuse-matmul-epilogue))' | FileCheck %s

// The SwiGLU gate: both projections and the gate in one region.
// CHECK-LABEL: func.func @swiglu
// CHECK-SAME: (%[[X:.+]]: tensor<8x16xf32>, %[[WG:.+]]: tensor<32x16xf32>, %[[WU:.+]]: tensor<32x16xf32>)
// CHECK: %[[F:.+]] = mf.fusion matmul_epilogue(%[[X]], %[[WG]], %[[WU]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT: mf.matmul
// CHECK-NEXT: mf.matmul
// CHECK-NEXT: mf.swiglu
// CHECK-NEXT: mf.yield
// CHECK: return %[[F]]
func.func @swiglu(%x: tensor<8x16xf32>, %wg: tensor<32x16xf32>, %wu: tensor<32x16xf32>) -> tensor<8x32xf32> {
  %g = mf.matmul %x, %wg transpose_rhs : tensor<8x16xf32>, tensor<32x16xf32> -> tensor<8x32xf32>
  %u = mf.matmul %x, %wu transpose_rhs : tensor<8x16xf32>, tensor<32x16xf32> -> tensor<8x32xf32>
  %h = mf.swiglu %g, %u : tensor<8x32xf32>
  return %h : tensor<8x32xf32>
}

// -----

// Bias, activation and residual: the elementwise region grows a matmul.
// CHECK-LABEL: func.func @bias_gelu_residual
// CHECK: mf.fusion matmul_epilogue({{.*}})
// CHECK-NEXT: ^bb0
// CHECK-NEXT: mf.matmul
// CHECK-NEXT: mf.broadcast
// CHECK-NEXT: mf.add
// CHECK-NEXT: mf.gelu
// CHECK-NEXT: mf.add
// CHECK-NOT: mf.fusion
func.func @bias_gelu_residual(%x: tensor<8x16xf32>, %w: tensor<16x16xf32>, %b: tensor<16xf32>) -> tensor<8x16xf32> {
  %0 = mf.matmul %x, %w : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
  %1 = mf.broadcast %b : tensor<16xf32> to tensor<8x16xf32>
  %2 = mf.add %0, %1 : tensor<8x16xf32>
  %3 = mf.gelu %2 approximate = tanh : tensor<8x16xf32>
  %4 = mf.add %3, %x : tensor<8x16xf32>
  return %4 : tensor<8x16xf32>
}

// -----

// A matmul whose result is also needed elsewhere stays on its own.
// CHECK-LABEL: func.func @shared_result
// CHECK: %[[M:.+]] = mf.matmul
// CHECK-NOT: mf.fusion
// CHECK: mf.silu %[[M]]
// CHECK: mf.softmax %[[M]]
func.func @shared_result(%x: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %0 = mf.matmul %x, %w : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
  %1 = mf.silu %0 : tensor<8x16xf32>
  %2 = mf.softmax %0 dim = 1 : tensor<8x16xf32>
  return %1, %2 : tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

// A weight gradient (x^T dy) whose consumer waits for a value computed later
// (an optimizer update that needs the global norm): fusing would move the
// product down and keep x and dy, far larger than the gradient, alive until
// then. It stays a product of its own; its consumer does not wait for it.
// CHECK-LABEL: func.func @late_consumer
// CHECK: %[[DW:.+]] = mf.matmul %{{.*}}, %{{.*}} transpose_lhs
// CHECK: mf.exp
// CHECK: mf.fusion elementwise(%[[DW]], {{.*}})
// CHECK-NOT: matmul_epilogue
func.func @late_consumer(%x: tensor<64x8xf32>, %dy: tensor<64x8xf32>, %z: tensor<64x8xf32>) -> tensor<8x8xf32> {
  %x2 = mf.exp %x : tensor<64x8xf32>
  %dy2 = mf.exp %dy : tensor<64x8xf32>
  %dw = mf.matmul %x2, %dy2 transpose_lhs : tensor<64x8xf32>, tensor<64x8xf32> -> tensor<8x8xf32>
  %later = mf.exp %z : tensor<64x8xf32>
  %s = mf.reduce_sum %later dim = 0 : tensor<64x8xf32> -> tensor<1x8xf32>
  %sb = mf.broadcast %s : tensor<1x8xf32> to tensor<8x8xf32>
  %u = mf.mul %dw, %sb : tensor<8x8xf32>
  return %u : tensor<8x8xf32>
}

// -----

// The same product with everything its consumer needs computed before it:
// nothing runs in between, so it fuses.
// CHECK-LABEL: func.func @early_consumer
// CHECK: mf.fusion matmul_epilogue({{.*}})
func.func @early_consumer(%x: tensor<64x8xf32>, %dy: tensor<64x8xf32>, %z: tensor<64x8xf32>) -> tensor<8x8xf32> {
  %later = mf.exp %z : tensor<64x8xf32>
  %s = mf.reduce_sum %later dim = 0 : tensor<64x8xf32> -> tensor<1x8xf32>
  %x2 = mf.exp %x : tensor<64x8xf32>
  %dy2 = mf.exp %dy : tensor<64x8xf32>
  %dw = mf.matmul %x2, %dy2 transpose_lhs : tensor<64x8xf32>, tensor<64x8xf32> -> tensor<8x8xf32>
  %sb = mf.broadcast %s : tensor<1x8xf32> to tensor<8x8xf32>
  %u = mf.mul %dw, %sb : tensor<8x8xf32>
  return %u : tensor<8x8xf32>
}

// -----

// Quantized weights: the region reads their i8 values and scales and
// dequantizes them itself (no float weight is stored), and the matmuls
// still move down to the gate past the dequantizations.
// CHECK-LABEL: func.func @swiglu_quantized
// CHECK-SAME: (%[[X:.+]]: tensor<8x16xf32>, %[[QG:.+]]: tensor<32x16xi8>, %[[SG:.+]]: tensor<32xf32>, %[[QU:.+]]: tensor<32x16xi8>, %[[SU:.+]]: tensor<32xf32>)
// CHECK-NOT: mf.dequantize
// CHECK: mf.fusion matmul_epilogue(%[[X]], %[[QG]], %[[SG]], %[[QU]], %[[SU]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT: mf.dequantize
// CHECK-NEXT: mf.matmul
// CHECK-NEXT: mf.dequantize
// CHECK-NEXT: mf.matmul
// CHECK-NEXT: mf.swiglu
func.func @swiglu_quantized(%x: tensor<8x16xf32>, %qg: tensor<32x16xi8>, %sg: tensor<32xf32>, %qu: tensor<32x16xi8>, %su: tensor<32xf32>) -> tensor<8x32xf32> {
  %wg = mf.dequantize %qg, %sg : tensor<32x16xi8>, tensor<32xf32> -> tensor<32x16xf32>
  %g = mf.matmul %x, %wg transpose_rhs : tensor<8x16xf32>, tensor<32x16xf32> -> tensor<8x32xf32>
  %wu = mf.dequantize %qu, %su : tensor<32x16xi8>, tensor<32xf32> -> tensor<32x16xf32>
  %u = mf.matmul %x, %wu transpose_rhs : tensor<8x16xf32>, tensor<32x16xf32> -> tensor<8x32xf32>
  %h = mf.swiglu %g, %u : tensor<8x32xf32>
  return %h : tensor<8x32xf32>
}
