// RUN: mf-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(mf-fuse-elementwise,mf-fuse-matmul-epilogue))' | FileCheck %s

// The SwiGLU gate: both projections and the gate in one region.
// CHECK-LABEL: func.func @swiglu
// CHECK-SAME: (%[[X:.+]]: tensor<8x16xf32>, %[[WG:.+]]: tensor<32x16xf32>, %[[WU:.+]]: tensor<32x16xf32>)
// CHECK: %[[F:.+]] = mf.fusion(%[[X]], %[[WG]], %[[WU]]) {kind = "matmul_epilogue"}
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
// CHECK: mf.fusion({{.*}}) {kind = "matmul_epilogue"}
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
