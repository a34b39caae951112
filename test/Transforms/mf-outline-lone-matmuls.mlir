// RUN: mf-opt %s --mf-outline-lone-matmuls | FileCheck %s

// A float matmul with a 2-D weight outside any region gets a region of its
// own; a batched matmul (a weight per batch) and one already in a region
// stay as they are.
// CHECK-LABEL: func.func @lone
// CHECK: mf.fusion matmul(%{{.*}}, %{{.*}})
// CHECK-NEXT: ^bb0
// CHECK-NEXT: mf.matmul
// CHECK: mf.matmul %{{.*}} : tensor<2x4x8xf32>, tensor<2x8x4xf32>
// CHECK: mf.fusion matmul_epilogue(%{{.*}}, %{{.*}})
// CHECK-NOT: mf.fusion
func.func @lone(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %a: tensor<2x4x8xf32>, %b: tensor<2x8x4xf32>) -> (tensor<4x16xf32>, tensor<2x4x4xf32>, tensor<4x16xf32>) {
  %0 = mf.matmul %x, %w transpose_rhs : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  %1 = mf.matmul %a, %b : tensor<2x4x8xf32>, tensor<2x8x4xf32> -> tensor<2x4x4xf32>
  %2 = mf.fusion matmul_epilogue(%x, %w) : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32> {
  ^bb0(%p: tensor<4x8xf32>, %q: tensor<16x8xf32>):
    %m = mf.matmul %p, %q transpose_rhs : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
    %e = mf.exp %m : tensor<4x16xf32>
    mf.yield %e : tensor<4x16xf32>
  }
  return %0, %1, %2 : tensor<4x16xf32>, tensor<2x4x4xf32>, tensor<4x16xf32>
}
