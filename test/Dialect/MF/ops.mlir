// RUN: mf-opt %s --split-input-file | FileCheck %s
// Round trip: print, parse again, print the same.
// RUN: mf-opt %s --split-input-file | mf-opt --split-input-file | FileCheck %s

// CHECK: mf.parameter @w : tensor<128x64xf32> init = normal {std = 2.000000e-02 : f64}
// CHECK: mf.parameter @g : tensor<64xbf16> init = ones
// CHECK-LABEL: func.func @parameters
// CHECK: mf.param @w : tensor<128x64xf32>
mf.parameter @w : tensor<128x64xf32> init = normal {std = 2.000000e-02 : f64}
mf.parameter @g : tensor<64xbf16> init = ones
func.func @parameters() -> tensor<128x64xf32> {
  %w = mf.param @w : tensor<128x64xf32>
  return %w : tensor<128x64xf32>
}

// -----

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<2x8xf32>, %b: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // CHECK: mf.add %{{.*}}, %{{.*}} : tensor<2x8xf32>
  %0 = mf.add %a, %b : tensor<2x8xf32>
  // CHECK: mf.sub
  %1 = mf.sub %0, %b : tensor<2x8xf32>
  // CHECK: mf.mul
  %2 = mf.mul %1, %b : tensor<2x8xf32>
  // CHECK: mf.div
  %3 = mf.div %2, %b : tensor<2x8xf32>
  // CHECK: mf.max
  %4 = mf.max %3, %b : tensor<2x8xf32>
  // CHECK: mf.neg
  %5 = mf.neg %4 : tensor<2x8xf32>
  // CHECK: mf.exp
  %6 = mf.exp %5 : tensor<2x8xf32>
  // CHECK: mf.log
  %7 = mf.log %6 : tensor<2x8xf32>
  // CHECK: mf.tanh
  %8 = mf.tanh %7 : tensor<2x8xf32>
  // CHECK: mf.rsqrt
  %9 = mf.rsqrt %8 : tensor<2x8xf32>
  // CHECK: mf.silu
  %10 = mf.silu %9 : tensor<2x8xf32>
  // CHECK: mf.gelu %{{.*}} approximate = tanh : tensor<2x8xf32>
  %11 = mf.gelu %10 approximate = tanh : tensor<2x8xf32>
  // CHECK: mf.gelu %{{.*}} approximate = none : tensor<2x8xf32>
  %12 = mf.gelu %11 approximate = none : tensor<2x8xf32>
  // CHECK: mf.swiglu
  %13 = mf.swiglu %12, %a : tensor<2x8xf32>
  // CHECK: mf.min
  %14 = mf.min %13, %b : tensor<2x8xf32>
  // CHECK: mf.sqrt
  %15 = mf.sqrt %14 : tensor<2x8xf32>
  return %15 : tensor<2x8xf32>
}

// -----

// A training step's update: the assignment is kept although unused.
mf.parameter @w : tensor<4xf32> init = ones
mf.parameter @optimizer.m.w : tensor<4xf32> init = zeros state
// CHECK-LABEL: func.func @update
func.func @update(%g: tensor<4xf32>) {
  // CHECK: mf.assign @w, %{{.*}} : tensor<4xf32>
  %0 = mf.assign @w, %g : tensor<4xf32>
  return
}

// -----

// CHECK-LABEL: func.func @shapes
func.func @shapes(%x: tensor<1x8x64xf32>, %bias: tensor<64xf16>) -> (tensor<1x4x8x16xf32>, tensor<1x8x32xf32>, tensor<1x16x64xf32>, tensor<1x8x64xf16>, tensor<1x8x1xf32>, tensor<1x8x1xf32>) {
  // CHECK: mf.reshape %{{.*}} : tensor<1x8x64xf32> to tensor<1x8x4x16xf32>
  %0 = mf.reshape %x : tensor<1x8x64xf32> to tensor<1x8x4x16xf32>
  // CHECK: mf.transpose %{{.*}} [0, 2, 1, 3] : tensor<1x8x4x16xf32> -> tensor<1x4x8x16xf32>
  %1 = mf.transpose %0 [0, 2, 1, 3] : tensor<1x8x4x16xf32> -> tensor<1x4x8x16xf32>
  // CHECK: mf.slice %{{.*}} [0, 0, 32] : tensor<1x8x64xf32> -> tensor<1x8x32xf32>
  %2 = mf.slice %x [0, 0, 32] : tensor<1x8x64xf32> -> tensor<1x8x32xf32>
  // CHECK: mf.concat %{{.*}}, %{{.*}} dim = 1 : (tensor<1x8x64xf32>, tensor<1x8x64xf32>) -> tensor<1x16x64xf32>
  %3 = mf.concat %x, %x dim = 1 : (tensor<1x8x64xf32>, tensor<1x8x64xf32>) -> tensor<1x16x64xf32>
  // CHECK: mf.broadcast %{{.*}} : tensor<64xf16> to tensor<1x8x64xf16>
  %4 = mf.broadcast %bias : tensor<64xf16> to tensor<1x8x64xf16>
  // CHECK: mf.reduce_sum %{{.*}} dim = 2 : tensor<1x8x64xf32> -> tensor<1x8x1xf32>
  %5 = mf.reduce_sum %x dim = 2 : tensor<1x8x64xf32> -> tensor<1x8x1xf32>
  // CHECK: mf.reduce_max %{{.*}} dim = 2
  %6 = mf.reduce_max %x dim = 2 : tensor<1x8x64xf32> -> tensor<1x8x1xf32>
  return %1, %2, %3, %4, %5, %6 : tensor<1x4x8x16xf32>, tensor<1x8x32xf32>, tensor<1x16x64xf32>, tensor<1x8x64xf16>, tensor<1x8x1xf32>, tensor<1x8x1xf32>
}

// -----

// CHECK-LABEL: func.func @model_ops
func.func @model_ops(%ids: tensor<1x8xi32>, %table: tensor<256x64xf32>, %w: tensor<64xf32>, %b: tensor<64xf32>, %proj: tensor<128x64xf32>) -> (tensor<1x8x128xf32>, tensor<1x8x64xf32>) {
  // CHECK: mf.embedding %{{.*}}, %{{.*}} : tensor<256x64xf32>, tensor<1x8xi32> -> tensor<1x8x64xf32>
  %h = mf.embedding %table, %ids : tensor<256x64xf32>, tensor<1x8xi32> -> tensor<1x8x64xf32>
  // CHECK: mf.rms_norm %{{.*}}, %{{.*}} eps = 1.000000e-05 : tensor<1x8x64xf32>, tensor<64xf32>
  %n = mf.rms_norm %h, %w eps = 1.0e-05 : tensor<1x8x64xf32>, tensor<64xf32>
  // CHECK: mf.layer_norm %{{.*}}, %{{.*}}, %{{.*}} eps = 1.000000e-05 : tensor<1x8x64xf32>, tensor<64xf32>
  %l = mf.layer_norm %n, %w, %b eps = 1.0e-05 : tensor<1x8x64xf32>, tensor<64xf32>
  // CHECK: mf.matmul %{{.*}}, %{{.*}} transpose_rhs : tensor<1x8x64xf32>, tensor<128x64xf32> -> tensor<1x8x128xf32>
  %y = mf.matmul %l, %proj transpose_rhs : tensor<1x8x64xf32>, tensor<128x64xf32> -> tensor<1x8x128xf32>
  // CHECK: mf.softmax %{{.*}} dim = 2 : tensor<1x8x128xf32>
  %p = mf.softmax %y dim = 2 : tensor<1x8x128xf32>
  // CHECK: mf.iota dim = 1 : tensor<1x8xi32>
  %pos = mf.iota dim = 1 : tensor<1x8xi32>
  // CHECK: mf.cast %{{.*}} : tensor<1x8x64xf32> to tensor<1x8x64xbf16>
  %c = mf.cast %l : tensor<1x8x64xf32> to tensor<1x8x64xbf16>
  return %p, %l : tensor<1x8x128xf32>, tensor<1x8x64xf32>
}

// -----

// CHECK-LABEL: func.func @attention_with_cache
func.func @attention_with_cache(%q: tensor<1x1x4x16xf32>, %k: tensor<1x1x2x16xf32>, %kc: tensor<1x32x2x16xf32>, %pos: tensor<1x1xi32>, %n: tensor<i32>) -> tensor<1x1x4x16xf32> {
  // CHECK: mf.rope %{{.*}}, %{{.*}} theta = 1.000000e+04 : tensor<1x1x4x16xf32>, tensor<1x1xi32>
  %qr = mf.rope %q, %pos theta = 1.0e+04 : tensor<1x1x4x16xf32>, tensor<1x1xi32>
  // CHECK: mf.rope %{{.*}}, %{{.*}} theta = 5.000000e+05 frequency_scale = [1.000000e+00, 5.000000e-01, 1.250000e-01, 1.250000e-01, 1.250000e-01, 1.250000e-01, 1.250000e-01, 1.250000e-01] inverse : tensor<1x1x4x16xf32>, tensor<1x1xi32>
  %qs = mf.rope %q, %pos theta = 5.0e+05 frequency_scale = [1.0, 0.5, 0.125, 0.125, 0.125, 0.125, 0.125, 0.125] inverse : tensor<1x1x4x16xf32>, tensor<1x1xi32>
  // CHECK: mf.kv_cache_write %{{.*}}, %{{.*}}, %{{.*}} : tensor<1x32x2x16xf32>, tensor<1x1x2x16xf32>
  %kc1 = mf.kv_cache_write %kc, %k, %n : tensor<1x32x2x16xf32>, tensor<1x1x2x16xf32>
  // CHECK: mf.attention %{{.*}}, %{{.*}}, %{{.*}} past_length(%{{.*}}) causal scale = 2.500000e-01 : tensor<1x1x4x16xf32>, tensor<1x32x2x16xf32>
  %o = mf.attention %qr, %kc1, %kc1 past_length(%n) causal scale = 2.5e-01 : tensor<1x1x4x16xf32>, tensor<1x32x2x16xf32>
  return %o : tensor<1x1x4x16xf32>
}

// -----

// Each batch row at its own position (a serving batch).
// CHECK-LABEL: func.func @attention_with_positions_per_row
func.func @attention_with_positions_per_row(%q: tensor<3x1x4x16xf32>, %k: tensor<3x1x2x16xf32>, %kc: tensor<3x32x2x16xf32>, %rows: tensor<3xi32>) -> tensor<3x1x4x16xf32> {
  // CHECK: mf.kv_cache_write %{{.*}}, %{{.*}}, %{{.*}} : tensor<3x32x2x16xf32>, tensor<3x1x2x16xf32>, tensor<3xi32>
  %kc1 = mf.kv_cache_write %kc, %k, %rows : tensor<3x32x2x16xf32>, tensor<3x1x2x16xf32>, tensor<3xi32>
  // CHECK: mf.attention %{{.*}}, %{{.*}}, %{{.*}} past_length(%{{.*}} : tensor<3xi32>) causal scale = 2.500000e-01 : tensor<3x1x4x16xf32>, tensor<3x32x2x16xf32>
  %o = mf.attention %q, %kc1, %kc1 past_length(%rows : tensor<3xi32>) causal scale = 2.5e-01 : tensor<3x1x4x16xf32>, tensor<3x32x2x16xf32>
  return %o : tensor<3x1x4x16xf32>
}

// -----

// A paged cache: pools of 64 blocks of 8 positions, each row's through its
// row of the block table (4 blocks: 32 positions).
// CHECK-LABEL: func.func @paged_attention
func.func @paged_attention(%q: tensor<3x1x4x16xf32>, %k: tensor<3x1x2x16xf32>, %pool: tensor<64x8x2x16xf32>, %rows: tensor<3xi32>, %table: tensor<3x4xi32>) -> tensor<3x1x4x16xf32> {
  // CHECK: mf.kv_cache_write %{{.*}}, %{{.*}}, %{{.*}} block_table(%{{.*}}) : tensor<64x8x2x16xf32>, tensor<3x1x2x16xf32>, tensor<3xi32>, tensor<3x4xi32>
  %p1 = mf.kv_cache_write %pool, %k, %rows block_table(%table) : tensor<64x8x2x16xf32>, tensor<3x1x2x16xf32>, tensor<3xi32>, tensor<3x4xi32>
  // CHECK: mf.attention %{{.*}}, %{{.*}}, %{{.*}} past_length(%{{.*}} : tensor<3xi32>) block_table(%{{.*}}) causal scale = 2.500000e-01 : tensor<3x1x4x16xf32>, tensor<64x8x2x16xf32>, tensor<3x4xi32>
  %o = mf.attention %q, %p1, %p1 past_length(%rows : tensor<3xi32>) block_table(%table) causal scale = 2.5e-01 : tensor<3x1x4x16xf32>, tensor<64x8x2x16xf32>, tensor<3x4xi32>
  return %o : tensor<3x1x4x16xf32>
}

// -----

// CHECK-LABEL: func.func @loss
func.func @loss(%logits: tensor<8x256xf32>, %labels: tensor<8xi32>) -> tensor<f32> {
  // CHECK: mf.cross_entropy %{{.*}}, %{{.*}} ignore_index = -100 : tensor<8x256xf32>, tensor<8xi32> -> tensor<f32>
  %0 = mf.cross_entropy %logits, %labels ignore_index = -100 : tensor<8x256xf32>, tensor<8xi32> -> tensor<f32>
  // CHECK: mf.constant dense<0> : tensor<i32>
  %1 = mf.constant dense<0> : tensor<i32>
  return %0 : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @fusion
// CHECK: %[[F:.+]]:2 = mf.fusion elementwise(%{{.*}}, %{{.*}}) : (tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
// CHECK: mf.yield %{{.*}}, %{{.*}} : tensor<8xf32>, tensor<8xf32>
func.func @fusion(%a: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %0:2 = mf.fusion elementwise(%a, %b) : (tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  ^bb0(%x: tensor<8xf32>, %y: tensor<8xf32>):
    %s = mf.add %x, %y : tensor<8xf32>
    %e = mf.exp %s : tensor<8xf32>
    mf.yield %s, %e : tensor<8xf32>, tensor<8xf32>
  }
  return %0#0, %0#1 : tensor<8xf32>, tensor<8xf32>
}

// -----

// The gradient ops mf-autodiff builds.
// CHECK-LABEL: func.func @gradients
// CHECK: mf.silu_grad %{{.*}}, %{{.*}} : tensor<1x4x16xf32>
// CHECK: mf.gelu_grad %{{.*}}, %{{.*}} approximate = tanh : tensor<1x4x16xf32>
// CHECK: mf.embedding_grad %{{.*}}, %{{.*}} : tensor<1x4xi32>, tensor<1x4x16xf32> -> tensor<32x16xf32>
// CHECK: mf.rms_norm_grad %{{.*}}, %{{.*}}, %{{.*}} eps = 1.000000e-05 wrt = 1 : tensor<1x4x16xf32>, tensor<16xf32> -> tensor<16xf32>
// CHECK: mf.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}} eps = 1.000000e-05 wrt = 0 : tensor<1x4x16xf32>, tensor<16xf32> -> tensor<1x4x16xf32>
// CHECK: mf.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} causal scale = 2.500000e-01 wrt = 1 : tensor<1x4x2x8xf32>, tensor<1x4x1x8xf32> -> tensor<1x4x1x8xf32>
// CHECK: mf.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} ignore_index = -100 : tensor<4x32xf32>, tensor<4xi32>, tensor<f32>
// CHECK: mf.pad %{{.*}} [0, 0, 16] : tensor<1x4x16xf32> -> tensor<1x4x48xf32>
// CHECK: mf.rope %{{.*}}, %{{.*}} theta = 1.000000e+04 inverse : tensor<1x4x2x8xf32>, tensor<1x4xi32>
func.func @gradients(%x: tensor<1x4x16xf32>, %g: tensor<1x4x16xf32>, %ids: tensor<1x4xi32>, %w: tensor<16xf32>,
                     %q: tensor<1x4x2x8xf32>, %k: tensor<1x4x1x8xf32>, %logits: tensor<4x32xf32>, %labels: tensor<4xi32>, %dl: tensor<f32>) {
  %0 = mf.silu_grad %x, %g : tensor<1x4x16xf32>
  %1 = mf.gelu_grad %x, %g approximate = tanh : tensor<1x4x16xf32>
  %2 = mf.embedding_grad %ids, %g : tensor<1x4xi32>, tensor<1x4x16xf32> -> tensor<32x16xf32>
  %3 = mf.rms_norm_grad %x, %w, %g eps = 1.0e-05 wrt = 1 : tensor<1x4x16xf32>, tensor<16xf32> -> tensor<16xf32>
  %4 = mf.layer_norm_grad %x, %w, %g eps = 1.0e-05 wrt = 0 : tensor<1x4x16xf32>, tensor<16xf32> -> tensor<1x4x16xf32>
  %5 = mf.attention_grad %q, %k, %k, %q causal scale = 2.5e-01 wrt = 1 : tensor<1x4x2x8xf32>, tensor<1x4x1x8xf32> -> tensor<1x4x1x8xf32>
  %6 = mf.cross_entropy_grad %logits, %labels, %dl ignore_index = -100 : tensor<4x32xf32>, tensor<4xi32>, tensor<f32>
  %7 = mf.pad %x [0, 0, 16] : tensor<1x4x16xf32> -> tensor<1x4x48xf32>
  %8 = mf.rope %q, %ids theta = 1.0e+04 inverse : tensor<1x4x2x8xf32>, tensor<1x4xi32>
  return
}

// -----

// Collectives of a sharded program round-trip.
shard.grid @grid(shape = 2x2)
mf.parameter @split_w : tensor<8x4xf32> init = ones sharding(@grid, [[1], []])
// CHECK: mf.parameter @fused_w : tensor<4x24xf32> init = ones sharding(@grid, {{\[\[}}], [1]] groups = 3)
mf.parameter @fused_w : tensor<4x24xf32> init = ones sharding(@grid, [[], [1]] groups = 3)
// CHECK-LABEL: func.func @collectives
func.func @collectives(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: mf.all_reduce %{{.*}} on @grid axes = [1] : tensor<4x8xf32>
  %0 = mf.all_reduce %x on @grid axes = [1] : tensor<4x8xf32>
  // CHECK: mf.replicate %{{.*}} on @grid axes = [1] : tensor<4x8xf32>
  %1 = mf.replicate %0 on @grid axes = [1] : tensor<4x8xf32>
  // CHECK: mf.reduce_scatter %{{.*}} on @grid axes = [0] dim = 0 : tensor<4x8xf32> -> tensor<2x8xf32>
  %2 = mf.reduce_scatter %1 on @grid axes = [0] dim = 0 : tensor<4x8xf32> -> tensor<2x8xf32>
  // CHECK: mf.all_gather %{{.*}} on @grid axes = [0] dim = 0 : tensor<2x8xf32> -> tensor<4x8xf32>
  %3 = mf.all_gather %2 on @grid axes = [0] dim = 0 : tensor<2x8xf32> -> tensor<4x8xf32>
  // CHECK: mf.scatter %{{.*}} on @grid axes = [0, 1] dim = 1 : tensor<4x8xf32> -> tensor<4x2xf32>
  %4 = mf.scatter %3 on @grid axes = [0, 1] dim = 1 : tensor<4x8xf32> -> tensor<4x2xf32>
  %w = mf.param @split_w : tensor<4x4xf32>
  return %3 : tensor<4x8xf32>
}

// -----

// Vocabulary-parallel lookups and losses name the grid axes the vocabulary
// is split over.
shard.grid @grid(shape = 1x2)
// CHECK-LABEL: func.func @vocab_parallel
func.func @vocab_parallel(%table: tensor<128x64xf32>, %ids: tensor<1x8xi32>,
                          %logits: tensor<8x128xf32>, %labels: tensor<8xi32>,
                          %dloss: tensor<f32>, %dy: tensor<1x8x64xf32>)
    -> (tensor<1x8x64xf32>, tensor<f32>, tensor<8x128xf32>, tensor<128x64xf32>) {
  // CHECK: mf.embedding %{{.*}}, %{{.*}} vocab on @grid axes = [1] : tensor<128x64xf32>, tensor<1x8xi32> -> tensor<1x8x64xf32>
  %h = mf.embedding %table, %ids vocab on @grid axes = [1] : tensor<128x64xf32>, tensor<1x8xi32> -> tensor<1x8x64xf32>
  // CHECK: mf.cross_entropy %{{.*}}, %{{.*}} ignore_index = -100 vocab on @grid axes = [1] : tensor<8x128xf32>, tensor<8xi32> -> tensor<f32>
  %loss = mf.cross_entropy %logits, %labels ignore_index = -100 vocab on @grid axes = [1] : tensor<8x128xf32>, tensor<8xi32> -> tensor<f32>
  // CHECK: mf.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} ignore_index = -100 vocab on @grid axes = [1] : tensor<8x128xf32>, tensor<8xi32>, tensor<f32>
  %dlogits = mf.cross_entropy_grad %logits, %labels, %dloss ignore_index = -100 vocab on @grid axes = [1] : tensor<8x128xf32>, tensor<8xi32>, tensor<f32>
  // CHECK: mf.embedding_grad %{{.*}}, %{{.*}} vocab on @grid axes = [1] : tensor<1x8xi32>, tensor<1x8x64xf32> -> tensor<128x64xf32>
  %dtable = mf.embedding_grad %ids, %dy vocab on @grid axes = [1] : tensor<1x8xi32>, tensor<1x8x64xf32> -> tensor<128x64xf32>
  return %h, %loss, %dlogits, %dtable : tensor<1x8x64xf32>, tensor<f32>, tensor<8x128xf32>, tensor<128x64xf32>
}

// -----

// MindFormers' fast_gelu (MindSpore's FastGeLU), its own op.
// CHECK-LABEL: func.func @fast_gelu
// CHECK: mf.fast_gelu %{{.*}} : tensor<2x8xbf16>
func.func @fast_gelu(%x: tensor<2x8xbf16>) -> tensor<2x8xbf16> {
  %0 = mf.fast_gelu %x : tensor<2x8xbf16>
  return %0 : tensor<2x8xbf16>
}

// -----

// A routed feed-forward: top-k choices, expert order, grouped projections,
// the weighted sum back.
// CHECK-LABEL: func.func @mixture_of_experts
func.func @mixture_of_experts(%x: tensor<6x16xf32>, %p: tensor<6x4xf32>,
                              %w0: tensor<24x16xf32>, %w1: tensor<24x16xf32>,
                              %w2: tensor<24x16xf32>, %w3: tensor<24x16xf32>,
                              %d: tensor<16x24xf32>) -> tensor<6x16xf32> {
  // CHECK: mf.top_k %{{.*}} k = 2 : tensor<6x4xf32> -> tensor<6x2xf32>, tensor<6x2xi32>
  %v, %i = mf.top_k %p k = 2 : tensor<6x4xf32> -> tensor<6x2xf32>, tensor<6x2xi32>
  // CHECK: mf.moe_route %{{.*}} num_experts = 4 : tensor<6x2xi32> -> tensor<6x2xi32>, tensor<5xi32>
  %pos, %off = mf.moe_route %i num_experts = 4 : tensor<6x2xi32> -> tensor<6x2xi32>, tensor<5xi32>
  // CHECK: mf.moe_route %{{.*}} num_experts = 4 capacity = 3 choice_order : tensor<6x2xi32> -> tensor<6x2xi32>, tensor<5xi32>
  %cpos, %coff = mf.moe_route %i num_experts = 4 capacity = 3 choice_order : tensor<6x2xi32> -> tensor<6x2xi32>, tensor<5xi32>
  // CHECK: mf.moe_dispatch %{{.*}}, %{{.*}} : (tensor<6x16xf32>, tensor<6x2xi32>) -> tensor<12x16xf32>
  %rows = mf.moe_dispatch %x, %pos : (tensor<6x16xf32>, tensor<6x2xi32>) -> tensor<12x16xf32>
  // CHECK: mf.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} transpose_rhs : tensor<12x16xf32>, tensor<5xi32>, tensor<24x16xf32>, tensor<24x16xf32>, tensor<24x16xf32>, tensor<24x16xf32> -> tensor<12x24xf32>
  %h = mf.grouped_matmul %rows, %off, %w0, %w1, %w2, %w3 transpose_rhs : tensor<12x16xf32>, tensor<5xi32>, tensor<24x16xf32>, tensor<24x16xf32>, tensor<24x16xf32>, tensor<24x16xf32> -> tensor<12x24xf32>
  %o = mf.grouped_matmul %h, %off, %d, %d, %d, %d transpose_rhs : tensor<12x24xf32>, tensor<5xi32>, tensor<16x24xf32>, tensor<16x24xf32>, tensor<16x24xf32>, tensor<16x24xf32> -> tensor<12x16xf32>
  // CHECK: mf.moe_combine %{{.*}}, %{{.*}}, %{{.*}} : tensor<12x16xf32>, tensor<6x2xi32>, tensor<6x2xf32> -> tensor<6x16xf32>
  %y = mf.moe_combine %o, %pos, %v : tensor<12x16xf32>, tensor<6x2xi32>, tensor<6x2xf32> -> tensor<6x16xf32>
  return %y : tensor<6x16xf32>
}

// -----

// Their gradients: the values' back at their indices, one expert's weight
// gradient, the routing weights', and a weighted dispatch.
// CHECK-LABEL: func.func @mixture_of_experts_gradients
func.func @mixture_of_experts_gradients(%dv: tensor<6x2xf32>, %i: tensor<6x2xi32>,
                                        %dh: tensor<12x24xf32>, %rows: tensor<12x16xf32>,
                                        %off: tensor<5xi32>, %dy: tensor<6x16xf32>,
                                        %pos: tensor<6x2xi32>, %p: tensor<6x2xf32>)
    -> (tensor<6x4xf32>, tensor<24x16xf32>, tensor<6x2xf32>, tensor<12x16xf32>) {
  // CHECK: mf.top_k_grad %{{.*}}, %{{.*}} width = 4 : tensor<6x2xf32>, tensor<6x2xi32> -> tensor<6x4xf32>
  %dp = mf.top_k_grad %dv, %i width = 4 : tensor<6x2xf32>, tensor<6x2xi32> -> tensor<6x4xf32>
  // CHECK: mf.grouped_matmul_weight_grad %{{.*}}, %{{.*}}, %{{.*}} expert = 3 : tensor<12x24xf32>, tensor<12x16xf32>, tensor<5xi32> -> tensor<24x16xf32>
  %dw = mf.grouped_matmul_weight_grad %dh, %rows, %off expert = 3 : tensor<12x24xf32>, tensor<12x16xf32>, tensor<5xi32> -> tensor<24x16xf32>
  // CHECK: mf.moe_weights_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<6x16xf32>, tensor<12x16xf32>, tensor<6x2xi32> -> tensor<6x2xf32>
  %dw2 = mf.moe_weights_grad %dy, %rows, %pos : tensor<6x16xf32>, tensor<12x16xf32>, tensor<6x2xi32> -> tensor<6x2xf32>
  // CHECK: mf.moe_dispatch %{{.*}}, %{{.*}}, %{{.*}} : (tensor<6x16xf32>, tensor<6x2xi32>, tensor<6x2xf32>) -> tensor<12x16xf32>
  %drows = mf.moe_dispatch %dy, %pos, %p : (tensor<6x16xf32>, tensor<6x2xi32>, tensor<6x2xf32>) -> tensor<12x16xf32>
  return %dp, %dw, %dw2, %drows : tensor<6x4xf32>, tensor<24x16xf32>, tensor<6x2xf32>, tensor<12x16xf32>
}

// -----

// A quantized weight (i8 values, per-row or per-group scales) and its
// dequantization.
// CHECK: mf.parameter @q : tensor<96x64xi8> init = zeros quantized(@q_scale)
// CHECK: mf.parameter @g : tensor<96x64xi8> init = zeros quantized(@g_scale group = 32)
// CHECK: mf.parameter @i4 : tensor<96x32xi8> init = zeros quantized(@i4_scale group = 32 bits = 4)
// CHECK-LABEL: func.func @dequantize
// CHECK: mf.dequantize %{{.*}}, %{{.*}} : tensor<96x64xi8>, tensor<96xf32> -> tensor<96x64xf32>
// CHECK: mf.dequantize %{{.*}}, %{{.*}} group_size = 32 : tensor<96x64xi8>, tensor<2x96xf16> -> tensor<96x64xf16>
// CHECK: mf.dequantize %{{.*}}, %{{.*}} group_size = 32 bits = 4 : tensor<96x32xi8>, tensor<2x96xf32> -> tensor<96x64xf32>
mf.parameter @q : tensor<96x64xi8> init = zeros quantized(@q_scale)
mf.parameter @q_scale : tensor<96xf32> init = ones
mf.parameter @g : tensor<96x64xi8> init = zeros quantized(@g_scale group = 32)
mf.parameter @g_scale : tensor<2x96xf16> init = ones
mf.parameter @i4 : tensor<96x32xi8> init = zeros quantized(@i4_scale group = 32 bits = 4)
mf.parameter @i4_scale : tensor<2x96xf32> init = ones
func.func @dequantize() -> (tensor<96x64xf32>, tensor<96x64xf16>, tensor<96x64xf32>) {
  %q = mf.param @q : tensor<96x64xi8>
  %s = mf.param @q_scale : tensor<96xf32>
  %w = mf.dequantize %q, %s : tensor<96x64xi8>, tensor<96xf32> -> tensor<96x64xf32>
  %gq = mf.param @g : tensor<96x64xi8>
  %gs = mf.param @g_scale : tensor<2x96xf16>
  %gw = mf.dequantize %gq, %gs group_size = 32 : tensor<96x64xi8>, tensor<2x96xf16> -> tensor<96x64xf16>
  %iq = mf.param @i4 : tensor<96x32xi8>
  %is = mf.param @i4_scale : tensor<2x96xf32>
  %iw = mf.dequantize %iq, %is group_size = 32 bits = 4 : tensor<96x32xi8>, tensor<2x96xf32> -> tensor<96x64xf32>
  return %w, %gw, %iw : tensor<96x64xf32>, tensor<96x64xf16>, tensor<96x64xf32>
}

// -----

// W8A8: rows quantized per token, dequantized, times an int8 weight read as
// dot panels.
// CHECK: mf.parameter @w : tensor<96x64xi8> init = zeros dot_panels quantized(@w_scale)
// CHECK-LABEL: func.func @int8_rows
// CHECK: %[[Q:.*]], %[[S:.*]] = mf.dynamic_quantize %{{.*}} : tensor<1x8x64xbf16> -> tensor<1x8x64xi8>, tensor<1x8xbf16>
// CHECK: mf.dequantize %[[Q]], %[[S]] : tensor<1x8x64xi8>, tensor<1x8xbf16> -> tensor<1x8x64xbf16>
mf.parameter @w : tensor<96x64xi8> init = zeros dot_panels quantized(@w_scale)
mf.parameter @w_scale : tensor<96xbf16> init = ones
func.func @int8_rows(%x: tensor<1x8x64xbf16>) -> tensor<1x8x96xbf16> {
  %q, %s = mf.dynamic_quantize %x : tensor<1x8x64xbf16> -> tensor<1x8x64xi8>, tensor<1x8xbf16>
  %rows = mf.dequantize %q, %s : tensor<1x8x64xi8>, tensor<1x8xbf16> -> tensor<1x8x64xbf16>
  %wq = mf.param @w : tensor<96x64xi8>
  %ws = mf.param @w_scale : tensor<96xbf16>
  %w = mf.dequantize %wq, %ws : tensor<96x64xi8>, tensor<96xbf16> -> tensor<96x64xbf16>
  %y = mf.matmul %rows, %w transpose_rhs : tensor<1x8x64xbf16>, tensor<96x64xbf16> -> tensor<1x8x96xbf16>
  return %y : tensor<1x8x96xbf16>
}

// -----

// Expert parallelism: experts stacked (parts: one checkpoint tensor each)
// and split over grid axis 0; the rows go to the ranks holding their
// experts and come back, the grouped matmul takes groups of the stacked
// weight's experts from each rank, and one op gives the stack's gradient.
shard.grid @grid(shape = 2x1)
// CHECK: mf.parameter @experts : tensor<4x24x16xf32> init = normal sharding(@grid, {{\[\[}}0], [], []]) {parts = ["e.0", "e.1", "e.2", "e.3"], std = 2.000000e-02 : f64}
mf.parameter @experts : tensor<4x24x16xf32> init = normal sharding(@grid, [[0], [], []]) {parts = ["e.0", "e.1", "e.2", "e.3"], std = 2.000000e-02 : f64}
// CHECK-LABEL: func.func @expert_parallel
func.func @expert_parallel(%rows: tensor<12x16xf32>, %off: tensor<5xi32>,
                           %w: tensor<2x24x16xf32>)
    -> (tensor<12x24xf32>, tensor<2x24x16xf32>) {
  // CHECK: mf.all_to_all_offsets %{{.*}} on @grid axes = [0] : tensor<5xi32>
  %recv_off = mf.all_to_all_offsets %off on @grid axes = [0] : tensor<5xi32>
  // CHECK: mf.all_to_all %{{.*}}, %{{.*}}, %{{.*}} on @grid axes = [0] : tensor<12x16xf32>, tensor<5xi32>, tensor<5xi32> -> tensor<24x16xf32>
  %recv = mf.all_to_all %rows, %off, %recv_off on @grid axes = [0] : tensor<12x16xf32>, tensor<5xi32>, tensor<5xi32> -> tensor<24x16xf32>
  // CHECK: mf.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}} transpose_rhs : tensor<24x16xf32>, tensor<5xi32>, tensor<2x24x16xf32> -> tensor<24x24xf32>
  %h = mf.grouped_matmul %recv, %recv_off, %w transpose_rhs : tensor<24x16xf32>, tensor<5xi32>, tensor<2x24x16xf32> -> tensor<24x24xf32>
  // CHECK: mf.grouped_matmul_weight_grad %{{.*}}, %{{.*}}, %{{.*}} expert = 0 stacked = 2 : tensor<24x24xf32>, tensor<24x16xf32>, tensor<5xi32> -> tensor<2x24x16xf32>
  %dw = mf.grouped_matmul_weight_grad %h, %recv, %recv_off expert = 0 stacked = 2 : tensor<24x24xf32>, tensor<24x16xf32>, tensor<5xi32> -> tensor<2x24x16xf32>
  // CHECK: mf.all_to_all %{{.*}}, %{{.*}}, %{{.*}} on @grid axes = [0] : tensor<24x24xf32>, tensor<5xi32>, tensor<5xi32> -> tensor<12x24xf32>
  %back = mf.all_to_all %h, %recv_off, %off on @grid axes = [0] : tensor<24x24xf32>, tensor<5xi32>, tensor<5xi32> -> tensor<12x24xf32>
  return %back, %dw : tensor<12x24xf32>, tensor<2x24x16xf32>
}

// -----

// Ulysses context parallelism over grid axis 3: the ranks trade their
// block of the sequence of every head for every position of their heads,
// and back.
shard.grid @grid(shape = 1x1x1x2)
// CHECK-LABEL: func.func @context_parallel_heads
func.func @context_parallel_heads(%q: tensor<1x8x4x16xf32>) -> tensor<1x8x4x16xf32> {
  // CHECK: mf.all_to_all_dims %{{.*}} on @grid axes = [3] split = 2 concat = 1 : tensor<1x8x4x16xf32> -> tensor<1x16x2x16xf32>
  %heads = mf.all_to_all_dims %q on @grid axes = [3] split = 2 concat = 1 : tensor<1x8x4x16xf32> -> tensor<1x16x2x16xf32>
  // CHECK: mf.all_to_all_dims %{{.*}} on @grid axes = [3] split = 1 concat = 2 : tensor<1x16x2x16xf32> -> tensor<1x8x4x16xf32>
  %back = mf.all_to_all_dims %heads on @grid axes = [3] split = 1 concat = 2 : tensor<1x16x2x16xf32> -> tensor<1x8x4x16xf32>
  return %back : tensor<1x8x4x16xf32>
}

// -----

// SmoothQuant: rows quantized with static scales and zero points, times a
// calibrated int8 weight in f32.
// CHECK: mf.parameter @c : tensor<96x64xi8> init = zeros quantized(@c_scale calibrated(@c_input_scale, @c_input_zero_point, @c_bias smooth = 5.000000e-01))
// CHECK: mf.parameter @c_input_zero_point : tensor<64xi8> init = zeros
// CHECK-LABEL: func.func @static_rows
// CHECK: mf.quantize %{{.*}}, %{{.*}}, %{{.*}} : tensor<1x8x64xf16>, tensor<64xf16>, tensor<64xi8> -> tensor<1x8x64xi8>
mf.parameter @c : tensor<96x64xi8> init = zeros quantized(@c_scale calibrated(@c_input_scale, @c_input_zero_point, @c_bias smooth = 0.5))
mf.parameter @c_scale : tensor<96xf32> init = ones
mf.parameter @c_input_scale : tensor<64xf16> init = ones
mf.parameter @c_input_zero_point : tensor<64xi8> init = zeros
mf.parameter @c_bias : tensor<96xf16> init = zeros
func.func @static_rows(%x: tensor<1x8x64xf16>) -> tensor<1x8x96xf32> {
  %is = mf.param @c_input_scale : tensor<64xf16>
  %zp = mf.param @c_input_zero_point : tensor<64xi8>
  %q = mf.quantize %x, %is, %zp : tensor<1x8x64xf16>, tensor<64xf16>, tensor<64xi8> -> tensor<1x8x64xi8>
  %rows = mf.cast %q : tensor<1x8x64xi8> to tensor<1x8x64xf32>
  %wq = mf.param @c : tensor<96x64xi8>
  %ws = mf.param @c_scale : tensor<96xf32>
  %w = mf.dequantize %wq, %ws : tensor<96x64xi8>, tensor<96xf32> -> tensor<96x64xf32>
  %y = mf.matmul %rows, %w transpose_rhs : tensor<1x8x64xf32>, tensor<96x64xf32> -> tensor<1x8x96xf32>
  return %y : tensor<1x8x96xf32>
}

// An int8 KV cache: rows quantized symmetrically per KV head and channel,
// read with the same scales.
// CHECK-LABEL: func.func @int8_kv_cache
func.func @int8_kv_cache(%q: tensor<1x1x4x16xf32>, %k: tensor<1x1x2x16xf32>, %c: tensor<1x32x2x16xi8>, %n: tensor<i32>, %s: tensor<2x16xf32>) -> tensor<1x1x4x16xf32> {
  // CHECK: mf.quantize %{{.*}}, %{{.*}} : tensor<1x1x2x16xf32>, tensor<2x16xf32> -> tensor<1x1x2x16xi8>
  %k8 = mf.quantize %k, %s : tensor<1x1x2x16xf32>, tensor<2x16xf32> -> tensor<1x1x2x16xi8>
  // CHECK: mf.kv_cache_write %{{.*}}, %{{.*}}, %{{.*}} : tensor<1x32x2x16xi8>, tensor<1x1x2x16xi8>
  %c1 = mf.kv_cache_write %c, %k8, %n : tensor<1x32x2x16xi8>, tensor<1x1x2x16xi8>
  // CHECK: mf.attention %{{.*}}, %{{.*}}, %{{.*}} past_length(%{{.*}}) causal scale = 2.500000e-01 kv_scales(%{{.*}}, %{{.*}} : tensor<2x16xf32>, tensor<2x16xf32>) : tensor<1x1x4x16xf32>, tensor<1x32x2x16xi8>
  %o = mf.attention %q, %c1, %c1 past_length(%n) causal scale = 2.5e-01 kv_scales(%s, %s : tensor<2x16xf32>, tensor<2x16xf32>) : tensor<1x1x4x16xf32>, tensor<1x32x2x16xi8>
  return %o : tensor<1x1x4x16xf32>
}
