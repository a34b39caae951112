// RUN: mf-opt %s --mf-partition=sequence-parallel=true | FileCheck %s

// Sequence parallelism (Korthikanti et al.): the embedding's output is split
// along the sequence, the norm runs on the rank's tokens with its weight
// through mf.replicate, the column-parallel input is all-gathered, the
// row-parallel sum reduce-scattered, and the lm_head's input all-gathered.
shard.grid @grid(shape = 1x2)
mf.parameter @emb : tensor<16x8xf32> init = ones
mf.parameter @norm : tensor<8xf32> init = ones
mf.parameter @w1 : tensor<8x8xf32> init = ones sharding(@grid, [[1], []])
mf.parameter @w2 : tensor<8x8xf32> init = ones sharding(@grid, [[], [1]])

// CHECK-LABEL: func.func @block
func.func @block(%ids: tensor<1x4xi32>) -> tensor<1x4x16xf32> {
  %emb = mf.param @emb : tensor<16x8xf32>
  // CHECK: %[[E:.*]] = mf.embedding
  // CHECK-NEXT: %[[S:.*]] = mf.scatter %[[E]] on @grid axes = [1] dim = 1 : tensor<1x4x8xf32> -> tensor<1x2x8xf32>
  %x = mf.embedding %emb, %ids : tensor<16x8xf32>, tensor<1x4xi32> -> tensor<1x4x8xf32>
  %g = mf.param @norm : tensor<8xf32>
  // CHECK: %[[G:.*]] = mf.replicate %{{.*}} on @grid axes = [1] : tensor<8xf32>
  // CHECK: %[[N:.*]] = mf.rms_norm %[[S]], %[[G]] {{.*}} : tensor<1x2x8xf32>
  %n = mf.rms_norm %x, %g eps = 1.0e-05 : tensor<1x4x8xf32>, tensor<8xf32>
  // CHECK: %[[A:.*]] = mf.all_gather %[[N]] on @grid axes = [1] dim = 1 : tensor<1x2x8xf32> -> tensor<1x4x8xf32>
  %w1 = mf.param @w1 : tensor<8x8xf32>
  // CHECK: mf.matmul %{{.*}}, %{{.*}} transpose_rhs : tensor<1x4x8xf32>, tensor<4x8xf32> -> tensor<1x4x4xf32>
  %h = mf.matmul %n, %w1 transpose_rhs : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %w2 = mf.param @w2 : tensor<8x8xf32>
  // CHECK: %[[P:.*]] = mf.matmul {{.*}} -> tensor<1x4x8xf32>
  // CHECK-NEXT: %[[R:.*]] = mf.reduce_scatter %[[P]] on @grid axes = [1] dim = 1 : tensor<1x4x8xf32> -> tensor<1x2x8xf32>
  %o = mf.matmul %h, %w2 transpose_rhs : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  // CHECK: %[[Y:.*]] = mf.add %[[S]], %[[R]] : tensor<1x2x8xf32>
  %y = mf.add %x, %o : tensor<1x4x8xf32>
  // CHECK: %[[L:.*]] = mf.all_gather %[[Y]] on @grid axes = [1] dim = 1
  // CHECK: mf.matmul %[[L]], %{{.*}} transpose_rhs : tensor<1x4x8xf32>, tensor<16x8xf32> -> tensor<1x4x16xf32>
  %logits = mf.matmul %y, %emb transpose_rhs : tensor<1x4x8xf32>, tensor<16x8xf32> -> tensor<1x4x16xf32>
  return %logits : tensor<1x4x16xf32>
}

// A vocabulary-parallel table: the lookup's partial sums are
// reduce-scattered along the sequence.
mf.parameter @vocab_emb : tensor<16x8xf32> init = ones sharding(@grid, [[1]])

// CHECK-LABEL: func.func @vocab_parallel
func.func @vocab_parallel(%ids: tensor<1x4xi32>) -> tensor<1x4x8xf32> {
  %emb = mf.param @vocab_emb : tensor<16x8xf32>
  // CHECK: %[[E:.*]] = mf.embedding %{{.*}}, %{{.*}} vocab on @grid axes = [1] : tensor<8x8xf32>, tensor<1x4xi32> -> tensor<1x4x8xf32>
  // CHECK-NEXT: %[[S:.*]] = mf.reduce_scatter %[[E]] on @grid axes = [1] dim = 1 : tensor<1x4x8xf32> -> tensor<1x2x8xf32>
  %x = mf.embedding %emb, %ids : tensor<16x8xf32>, tensor<1x4xi32> -> tensor<1x4x8xf32>
  // CHECK: %[[W:.*]] = mf.all_gather %[[S]] on @grid axes = [1] dim = 1 : tensor<1x2x8xf32> -> tensor<1x4x8xf32>
  // CHECK-NEXT: return %[[W]]
  return %x : tensor<1x4x8xf32>
}

// A bias added after a reduce-scattered row-parallel sum: each rank adds
// its tokens' share of the broadcast bias (mf.scatter, no communication).
mf.parameter @proj : tensor<8x8xf32> init = ones sharding(@grid, [[1], []])
mf.parameter @proj_bias : tensor<8xf32> init = zeros

// CHECK-LABEL: func.func @row_parallel_bias
func.func @row_parallel_bias(%ids: tensor<1x4xi32>) -> tensor<1x4x8xf32> {
  %emb = mf.param @emb : tensor<16x8xf32>
  %x = mf.embedding %emb, %ids : tensor<16x8xf32>, tensor<1x4xi32> -> tensor<1x4x8xf32>
  %w1 = mf.param @w1 : tensor<8x8xf32>
  %h = mf.matmul %x, %w1 transpose_rhs : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %w = mf.param @proj : tensor<8x8xf32>
  // CHECK: %[[SUM:.*]] = mf.reduce_scatter %{{.*}} on @grid axes = [1] dim = 1 : tensor<1x4x8xf32> -> tensor<1x2x8xf32>
  %o = mf.matmul %h, %w : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %b = mf.param @proj_bias : tensor<8xf32>
  // CHECK: %[[B:.*]] = mf.broadcast
  // CHECK-NEXT: %[[MINE:.*]] = mf.scatter %[[B]] on @grid axes = [1] dim = 1 : tensor<1x4x8xf32> -> tensor<1x2x8xf32>
  // CHECK: mf.add %[[SUM]], %[[MINE]] : tensor<1x2x8xf32>
  %bb = mf.broadcast %b : tensor<8xf32> to tensor<1x4x8xf32>
  %y = mf.add %o, %bb : tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}
