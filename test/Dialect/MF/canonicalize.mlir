// RUN: mf-opt %s --split-input-file --canonicalize | FileCheck %s

// CHECK-LABEL: func.func @reshape_chain
// CHECK-SAME: (%[[X:.+]]: tensor<2x8xf32>)
// CHECK: %[[R:.+]] = mf.reshape %[[X]] : tensor<2x8xf32> to tensor<16xf32>
// CHECK-NEXT: return %[[R]]
func.func @reshape_chain(%x: tensor<2x8xf32>) -> tensor<16xf32> {
  %0 = mf.reshape %x : tensor<2x8xf32> to tensor<4x4xf32>
  %1 = mf.reshape %0 : tensor<4x4xf32> to tensor<16xf32>
  return %1 : tensor<16xf32>
}

// -----

// CHECK-LABEL: func.func @identity_ops
// CHECK-SAME: (%[[X:.+]]: tensor<2x8xf32>)
// CHECK-NOT: mf.
// CHECK: return %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[X]]
func.func @identity_ops(%x: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %0 = mf.reshape %x : tensor<2x8xf32> to tensor<2x8xf32>
  %1 = mf.transpose %x [0, 1] : tensor<2x8xf32> -> tensor<2x8xf32>
  %2 = mf.cast %x : tensor<2x8xf32> to tensor<2x8xf32>
  %3 = mf.broadcast %x : tensor<2x8xf32> to tensor<2x8xf32>
  %4 = mf.slice %x [0, 0] : tensor<2x8xf32> -> tensor<2x8xf32>
  %5 = mf.concat %x dim = 0 : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}

// -----

// Two transposes compose into one; a pair that cancels disappears.
// CHECK-LABEL: func.func @transpose_chain
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>)
// CHECK: %[[T:.+]] = mf.transpose %[[X]] [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
// CHECK-NOT: mf.transpose
// CHECK: return %[[T]], %[[X]]
func.func @transpose_chain(%x: tensor<2x3x4xf32>) -> (tensor<4x2x3xf32>, tensor<2x3x4xf32>) {
  %0 = mf.transpose %x [1, 0, 2] : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  %1 = mf.transpose %0 [2, 1, 0] : tensor<3x2x4xf32> -> tensor<4x2x3xf32>
  %2 = mf.transpose %x [0, 2, 1] : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  %3 = mf.transpose %2 [0, 2, 1] : tensor<2x4x3xf32> -> tensor<2x3x4xf32>
  return %1, %3 : tensor<4x2x3xf32>, tensor<2x3x4xf32>
}

// -----

// A reshape of a splat constant folds to a constant.
// CHECK-LABEL: func.func @reshape_splat
// CHECK: %[[C:.+]] = mf.constant dense<1.000000e+00> : tensor<4x2xf32>
// CHECK-NEXT: return %[[C]]
func.func @reshape_splat() -> tensor<4x2xf32> {
  %0 = mf.constant dense<1.0> : tensor<8xf32>
  %1 = mf.reshape %0 : tensor<8xf32> to tensor<4x2xf32>
  return %1 : tensor<4x2xf32>
}

// -----

// A broadcast splat is a splat of the larger shape; positions past an empty
// cache (x + 0 on integers) are x. A float x + 0 stays (-0 + 0 is +0).
// CHECK-LABEL: func.func @splats
// CHECK-SAME: (%[[I:.+]]: tensor<4xi32>, %[[F:.+]]: tensor<4xf32>)
// CHECK-DAG: %[[S:.+]] = mf.constant dense<2.500000e-01> : tensor<2x4xf32>
// CHECK-DAG: %[[Z:.+]] = mf.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK: %[[A:.+]] = mf.add %[[F]], %[[Z]]
// CHECK: return %[[S]], %[[I]], %[[A]]
func.func @splats(%i: tensor<4xi32>, %f: tensor<4xf32>) -> (tensor<2x4xf32>, tensor<4xi32>, tensor<4xf32>) {
  %c = mf.constant dense<2.5e-01> : tensor<f32>
  %0 = mf.broadcast %c : tensor<f32> to tensor<2x4xf32>
  %zi = mf.constant dense<0> : tensor<4xi32>
  %1 = mf.add %i, %zi : tensor<4xi32>
  %zf = mf.constant dense<0.0> : tensor<4xf32>
  %2 = mf.add %f, %zf : tensor<4xf32>
  return %0, %1, %2 : tensor<2x4xf32>, tensor<4xi32>, tensor<4xf32>
}

// -----

// The block of an all-reduce is a reduce-scatter over the same ranks (the
// backward of an all-gather read by column-parallel matmuls).
shard.grid @grid(shape = 1x2)
// CHECK-LABEL: func.func @scatter_of_all_reduce
func.func @scatter_of_all_reduce(%g: tensor<1x8x4xf32>) -> tensor<1x4x4xf32> {
  // CHECK-NEXT: %[[R:.*]] = mf.reduce_scatter %{{.*}} on @grid axes = [1] dim = 1 : tensor<1x8x4xf32> -> tensor<1x4x4xf32>
  // CHECK-NEXT: return %[[R]]
  %0 = mf.all_reduce %g on @grid axes = [1] : tensor<1x8x4xf32>
  %1 = mf.scatter %0 on @grid axes = [1] dim = 1 : tensor<1x8x4xf32> -> tensor<1x4x4xf32>
  return %1 : tensor<1x4x4xf32>
}

// mf.replicate is the identity once autodiff has used it.
// CHECK-LABEL: func.func @replicate_folds
func.func @replicate_folds(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK-NEXT: return %arg0
  %0 = mf.replicate %x on @grid axes = [1] : tensor<4xf32>
  return %0 : tensor<4xf32>
}
