// RUN: mf-opt %s --split-input-file --mf-quantize-weights="bits=4 group-size=4" --verify-diagnostics | FileCheck %s

// A split weight's companions split along the dimension that holds its
// split one: a column-parallel weight's group scales [K / G, N] along N, a
// row-parallel one's along K / G.
// CHECK: mf.parameter @col : tensor<8x8xi8> init = normal sharding(@grid, {{\[\[}}1], []]) quantized(@col_scale group = 4 bits = 4)
// CHECK-NEXT: mf.parameter @col_scale : tensor<4x8xf32> init = ones sharding(@grid, {{\[\[}}], [1]])
// CHECK: mf.parameter @row : tensor<8x8xi8> init = normal sharding(@grid, {{\[\[}}], [1]]) quantized(@row_scale group = 4 bits = 4)
// CHECK-NEXT: mf.parameter @row_scale : tensor<4x8xf32> init = ones sharding(@grid, {{\[\[}}1], []])
shard.grid @grid(shape = 1x2)
mf.parameter @col : tensor<8x16xf32> init = normal sharding(@grid, [[1], []]) {std = 2.000000e-02 : f64}
mf.parameter @row : tensor<8x16xf32> init = normal sharding(@grid, [[], [1]]) {std = 2.000000e-02 : f64}
func.func @both(%x: tensor<2x16xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %c = mf.param @col : tensor<8x16xf32>
  %r = mf.param @row : tensor<8x16xf32>
  %y = mf.matmul %x, %c transpose_rhs : tensor<2x16xf32>, tensor<8x16xf32> -> tensor<2x8xf32>
  %z = mf.matmul %x, %r transpose_rhs : tensor<2x16xf32>, tensor<8x16xf32> -> tensor<2x8xf32>
  return %y, %z : tensor<2x8xf32>, tensor<2x8xf32>
}

// -----

// A row-parallel rank holds whole groups of its columns.
shard.grid @grid(shape = 1x4)
// expected-error @+1 {{mf-quantize-weights: K = 8 of this [8, 8] weight splits 4 ways (model_parallel) into 2 columns a rank, not a multiple of the group size 4; choose a group_size that divides 2 or add the layer to modules_to_not_convert}}
mf.parameter @row : tensor<8x8xf32> init = normal sharding(@grid, [[], [1]]) {std = 2.000000e-02 : f64}
func.func @narrow(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %r = mf.param @row : tensor<8x8xf32>
  %z = mf.matmul %x, %r transpose_rhs : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  return %z : tensor<2x8xf32>
}

// -----

// Columns split over ranks in parts: the scales could not follow.
shard.grid @grid(shape = 1x2)
// expected-error @+1 {{mf-quantize-weights: this weight's columns split over ranks in 2 parts, which its scales cannot follow; add the layer to modules_to_not_convert}}
mf.parameter @parts : tensor<8x16xf32> init = normal sharding(@grid, [[], [1]] groups = 2) {std = 2.000000e-02 : f64}
func.func @in_parts(%x: tensor<2x16xf32>) -> tensor<2x8xf32> {
  %r = mf.param @parts : tensor<8x16xf32>
  %z = mf.matmul %x, %r transpose_rhs : tensor<2x16xf32>, tensor<8x16xf32> -> tensor<2x8xf32>
  return %z : tensor<2x8xf32>
}
