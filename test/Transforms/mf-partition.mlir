// RUN: mf-opt %s --split-input-file --mf-partition --verify-diagnostics | FileCheck %s

// Megatron's attention block on 2 ranks: column-parallel q/k/v (with a
// bias), heads split by the reshape, attention on the rank's heads, a
// row-parallel output projection and its all-reduce; the KV cache argument
// and result take the rank's KV heads.
shard.grid @grid(shape = 1x2)
mf.parameter @wq : tensor<8x8xf32> init = ones sharding(@grid, [[1], []])
mf.parameter @bq : tensor<8xf32> init = zeros sharding(@grid, [[1]])
mf.parameter @wk : tensor<4x8xf32> init = ones sharding(@grid, [[1], []])
mf.parameter @wo : tensor<8x8xf32> init = ones sharding(@grid, [[], [1]])
mf.parameter @norm : tensor<8xf32> init = ones

// CHECK-LABEL: func.func @block
// CHECK-SAME: (%{{.*}}: tensor<1x3x8xf32>, %[[CACHE:.*]]: tensor<1x3x1x2xf32>, %{{.*}}: tensor<i32>) -> (tensor<1x3x8xf32>, tensor<1x3x1x2xf32>)
func.func @block(%x: tensor<1x3x8xf32>, %cache: tensor<1x3x2x2xf32>, %past: tensor<i32>)
    -> (tensor<1x3x8xf32>, tensor<1x3x2x2xf32>) {
  %g = mf.param @norm : tensor<8xf32>
  %n = mf.rms_norm %x, %g eps = 1.0e-05 : tensor<1x3x8xf32>, tensor<8xf32>
  // The input of the column-parallel q and k projections: one mf.replicate,
  // whose gradient rule sums their partial gradients over the ranks.
  // CHECK: %[[N:.*]] = mf.rms_norm
  // CHECK-NEXT: %[[R:.*]] = mf.replicate %[[N]] on @grid axes = [1] : tensor<1x3x8xf32>
  // CHECK: mf.param @wq : tensor<4x8xf32>
  %wq = mf.param @wq : tensor<8x8xf32>
  %bq = mf.param @bq : tensor<8xf32>
  // CHECK: mf.matmul %[[R]], {{.*}} -> tensor<1x3x4xf32>
  %q0 = mf.matmul %n, %wq transpose_rhs : tensor<1x3x8xf32>, tensor<8x8xf32> -> tensor<1x3x8xf32>
  // CHECK: mf.broadcast {{.*}} : tensor<4xf32> to tensor<1x3x4xf32>
  %b = mf.broadcast %bq : tensor<8xf32> to tensor<1x3x8xf32>
  %q1 = mf.add %q0, %b : tensor<1x3x8xf32>
  // CHECK: mf.reshape {{.*}} to tensor<1x3x2x2xf32>
  %q = mf.reshape %q1 : tensor<1x3x8xf32> to tensor<1x3x4x2xf32>
  %wk = mf.param @wk : tensor<4x8xf32>
  // CHECK: mf.matmul %[[R]], {{.*}} -> tensor<1x3x2xf32>
  %k0 = mf.matmul %n, %wk transpose_rhs : tensor<1x3x8xf32>, tensor<4x8xf32> -> tensor<1x3x4xf32>
  %k = mf.reshape %k0 : tensor<1x3x4xf32> to tensor<1x3x2x2xf32>
  // CHECK: mf.kv_cache_write %[[CACHE]], {{.*}} : tensor<1x3x1x2xf32>, tensor<1x3x1x2xf32>
  %c = mf.kv_cache_write %cache, %k, %past : tensor<1x3x2x2xf32>, tensor<1x3x2x2xf32>
  // CHECK: mf.attention {{.*}} : tensor<1x3x2x2xf32>, tensor<1x3x1x2xf32>
  %a = mf.attention %q, %c, %c past_length(%past) causal scale = 0.5 : tensor<1x3x4x2xf32>, tensor<1x3x2x2xf32>
  %a1 = mf.reshape %a : tensor<1x3x4x2xf32> to tensor<1x3x8xf32>
  // CHECK: mf.param @wo : tensor<8x4xf32>
  %wo = mf.param @wo : tensor<8x8xf32>
  // CHECK: %[[PARTIAL:.*]] = mf.matmul {{.*}} : tensor<1x3x4xf32>, tensor<8x4xf32> -> tensor<1x3x8xf32>
  // CHECK-NEXT: %[[SUM:.*]] = mf.all_reduce %[[PARTIAL]] on @grid axes = [1] : tensor<1x3x8xf32>
  // CHECK-NEXT: mf.add %{{.*}}, %[[SUM]] : tensor<1x3x8xf32>
  %o = mf.matmul %a1, %wo transpose_rhs : tensor<1x3x8xf32>, tensor<8x8xf32> -> tensor<1x3x8xf32>
  %y = mf.add %x, %o : tensor<1x3x8xf32>
  return %y, %c : tensor<1x3x8xf32>, tensor<1x3x2x2xf32>
}

// -----

// A split value meeting an op with no rule for it is an error: the pass
// never gathers behind the user's back.
shard.grid @grid(shape = 1x2)
mf.parameter @w : tensor<8x8xf32> init = ones sharding(@grid, [[1], []])
func.func @softmax_over_split(%x: tensor<1x3x8xf32>) -> tensor<1x3x8xf32> {
  %w = mf.param @w : tensor<8x8xf32>
  %y = mf.matmul %x, %w transpose_rhs : tensor<1x3x8xf32>, tensor<8x8xf32> -> tensor<1x3x8xf32>
  // expected-error @+1 {{cannot be partitioned: no sharding rule for its operands' splits (dim 2)}}
  %s = mf.softmax %y dim = 2 : tensor<1x3x8xf32>
  return %s : tensor<1x3x8xf32>
}

// -----

// Without split parameters nothing changes.
mf.parameter @w : tensor<8x8xf32> init = ones
// CHECK-LABEL: func.func @unsharded
// CHECK: mf.matmul {{.*}} -> tensor<1x3x8xf32>
// CHECK-NOT: mf.all_reduce
func.func @unsharded(%x: tensor<1x3x8xf32>) -> tensor<1x3x8xf32> {
  %w = mf.param @w : tensor<8x8xf32>
  %y = mf.matmul %x, %w transpose_rhs : tensor<1x3x8xf32>, tensor<8x8xf32> -> tensor<1x3x8xf32>
  return %y : tensor<1x3x8xf32>
}

// -----

// A parameter split along two dimensions is refused (one split a value).
shard.grid @grid(shape = 2x2)
// expected-error @+1 {{is split along two dimensions; mf-partition splits one}}
mf.parameter @w : tensor<8x8xf32> init = ones sharding(@grid, [[0], [1]])
func.func @two_dims() -> tensor<4x4xf32> {
  %w = mf.param @w : tensor<4x4xf32>
  return %w : tensor<4x4xf32>
}

// -----

// A split that does not divide the value it reaches.
shard.grid @grid(shape = 1x2)
mf.parameter @w : tensor<6x8xf32> init = ones sharding(@grid, [[1], []])
func.func @odd_reshape(%x: tensor<1x3x8xf32>) -> tensor<1x3x3x2xf32> {
  %w = mf.param @w : tensor<6x8xf32>
  %y = mf.matmul %x, %w transpose_rhs : tensor<1x3x8xf32>, tensor<6x8xf32> -> tensor<1x3x6xf32>
  // expected-error @+1 {{cannot be partitioned: no sharding rule for its operands' splits (dim 2)}}
  %h = mf.reshape %y : tensor<1x3x6xf32> to tensor<1x3x3x2xf32>
  return %h : tensor<1x3x3x2xf32>
}

// -----

// vocab_emb_dp: False (Megatron's vocabulary parallelism): the tied table is
// split by rows. The lookup of the rank's rows is a partial sum,
// all-reduced; the lm_head is column-parallel, its logits all-gathered
// where an entry returns them, and the loss of a vocabulary block is the
// vocab-parallel cross-entropy.
shard.grid @grid(shape = 1x2)
mf.parameter @table : tensor<8x4xf32> init = ones sharding(@grid, [[1]])

// CHECK-LABEL: func.func @vocab_parallel_logits
// CHECK-SAME: -> tensor<1x3x8xf32>
func.func @vocab_parallel_logits(%ids: tensor<1x3xi32>) -> tensor<1x3x8xf32> {
  %t = mf.param @table : tensor<8x4xf32>
  // CHECK: %[[PARTIAL:.*]] = mf.embedding %{{.*}}, %{{.*}} vocab on @grid axes = [1] : tensor<4x4xf32>, tensor<1x3xi32> -> tensor<1x3x4xf32>
  // CHECK-NEXT: %[[H:.*]] = mf.all_reduce %[[PARTIAL]] on @grid axes = [1] : tensor<1x3x4xf32>
  %h = mf.embedding %t, %ids : tensor<8x4xf32>, tensor<1x3xi32> -> tensor<1x3x4xf32>
  // CHECK: mf.replicate %[[H]] on @grid axes = [1]
  // CHECK: %[[BLOCK:.*]] = mf.matmul {{.*}} transpose_rhs : tensor<1x3x4xf32>, tensor<4x4xf32> -> tensor<1x3x4xf32>
  // CHECK-NEXT: %[[WHOLE:.*]] = mf.all_gather %[[BLOCK]] on @grid axes = [1] dim = 2 : tensor<1x3x4xf32> -> tensor<1x3x8xf32>
  // CHECK-NEXT: return %[[WHOLE]]
  %logits = mf.matmul %h, %t transpose_rhs : tensor<1x3x4xf32>, tensor<8x4xf32> -> tensor<1x3x8xf32>
  return %logits : tensor<1x3x8xf32>
}

// CHECK-LABEL: func.func @vocab_parallel_loss
func.func @vocab_parallel_loss(%ids: tensor<1x3xi32>, %labels: tensor<3xi32>) -> tensor<f32> {
  %t = mf.param @table : tensor<8x4xf32>
  %h = mf.embedding %t, %ids : tensor<8x4xf32>, tensor<1x3xi32> -> tensor<1x3x4xf32>
  %logits = mf.matmul %h, %t transpose_rhs : tensor<1x3x4xf32>, tensor<8x4xf32> -> tensor<1x3x8xf32>
  // CHECK: mf.reshape %{{.*}} : tensor<1x3x4xf32> to tensor<3x4xf32>
  // CHECK-NEXT: mf.cross_entropy %{{.*}}, %{{.*}} ignore_index = -100 vocab on @grid axes = [1] : tensor<3x4xf32>, tensor<3xi32> -> tensor<f32>
  // CHECK-NOT: mf.all_gather
  %flat = mf.reshape %logits : tensor<1x3x8xf32> to tensor<3x8xf32>
  %loss = mf.cross_entropy %flat, %labels ignore_index = -100 : tensor<3x8xf32>, tensor<3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A table split by columns has no rule (the frontend splits rows).
shard.grid @grid(shape = 1x2)
mf.parameter @table : tensor<8x4xf32> init = ones sharding(@grid, [[], [1]])
func.func @table_by_columns(%ids: tensor<1x3xi32>) -> tensor<1x3x4xf32> {
  %t = mf.param @table : tensor<8x4xf32>
  // expected-error @+1 {{cannot be partitioned: no sharding rule for its operands' splits (dim 1, replicated)}}
  %h = mf.embedding %t, %ids : tensor<8x4xf32>, tensor<1x3xi32> -> tensor<1x3x4xf32>
  return %h : tensor<1x3x4xf32>
}

// -----

// GPT-2's fused q, k, v: the weight is split in each of its three parts, so
// that a third of the column-parallel result is the rank's heads' share of
// q, k or v.
shard.grid @grid(shape = 1x2)
mf.parameter @c_attn : tensor<8x24xf32> init = ones sharding(@grid, [[], [1]] groups = 3)

// CHECK-LABEL: func.func @fused_qkv
func.func @fused_qkv(%x: tensor<1x3x8xf32>) -> tensor<1x3x8xf32> {
  %w = mf.param @c_attn : tensor<8x24xf32>
  // CHECK: mf.matmul %{{.*}}, %{{.*}} : tensor<1x3x8xf32>, tensor<8x12xf32> -> tensor<1x3x12xf32>
  %qkv = mf.matmul %x, %w : tensor<1x3x8xf32>, tensor<8x24xf32> -> tensor<1x3x24xf32>
  // CHECK: %[[K:.*]] = mf.slice %{{.*}} [0, 0, 4] : tensor<1x3x12xf32> -> tensor<1x3x4xf32>
  %k = mf.slice %qkv [0, 0, 8] : tensor<1x3x24xf32> -> tensor<1x3x8xf32>
  // CHECK: mf.all_gather %[[K]] on @grid axes = [1] dim = 2 : tensor<1x3x4xf32> -> tensor<1x3x8xf32>
  return %k : tensor<1x3x8xf32>
}

// -----

// A slice across the parts has no rule.
shard.grid @grid(shape = 1x2)
mf.parameter @c_attn : tensor<8x24xf32> init = ones sharding(@grid, [[], [1]] groups = 3)
func.func @across_parts(%x: tensor<1x3x8xf32>) -> tensor<1x3x8xf32> {
  %w = mf.param @c_attn : tensor<8x24xf32>
  %qkv = mf.matmul %x, %w : tensor<1x3x8xf32>, tensor<8x24xf32> -> tensor<1x3x24xf32>
  // expected-error @+1 {{cannot be partitioned: no sharding rule for its operands' splits (dim 2 in 3 parts)}}
  %k = mf.slice %qkv [0, 0, 4] : tensor<1x3x24xf32> -> tensor<1x3x8xf32>
  return %k : tensor<1x3x8xf32>
}

// -----

// A splat constant (LoRA's scale) meeting a split value takes the rank's
// block type: it is the same everywhere.
shard.grid @grid(shape = 1x2)
mf.parameter @b : tensor<24x4xf32> init = zeros sharding(@grid, [[1]] groups = 3)

// CHECK-LABEL: func.func @scaled
func.func @scaled(%x: tensor<1x3x4xf32>) -> tensor<1x3x8xf32> {
  %b = mf.param @b : tensor<24x4xf32>
  %up = mf.matmul %x, %b transpose_rhs : tensor<1x3x4xf32>, tensor<24x4xf32> -> tensor<1x3x24xf32>
  // CHECK: %[[S:.*]] = mf.constant dense<2.000000e+00> : tensor<1x3x12xf32>
  // CHECK: mf.mul %{{.*}}, %[[S]] : tensor<1x3x12xf32>
  %s = mf.constant dense<2.0> : tensor<1x3x24xf32>
  %y = mf.mul %up, %s : tensor<1x3x24xf32>
  %k = mf.slice %y [0, 0, 0] : tensor<1x3x24xf32> -> tensor<1x3x8xf32>
  return %k : tensor<1x3x8xf32>
}
