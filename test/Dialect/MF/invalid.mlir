// RUN: mf-opt %s --split-input-file --verify-diagnostics

func.func @param_missing() -> tensor<4xf32> {
  // expected-error @+1 {{'nope' does not name an mf.parameter}}
  %0 = mf.param @nope : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

mf.parameter @w : tensor<4xf32> init = ones
func.func @param_type() -> tensor<8xf32> {
  // expected-error @+1 {{type 'tensor<8xf32>' does not match 'tensor<4xf32>' of parameter 'w'}}
  %0 = mf.param @w : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// expected-error @+1 {{init = normal needs a positive 'std' attribute}}
mf.parameter @w : tensor<4xf32> init = normal

// -----

// expected-error @+1 {{'std' is only meaningful with init = normal}}
mf.parameter @w : tensor<4xf32> init = zeros {std = 1.0 : f64}

// -----

func.func @dynamic_shape(%a: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{operand #0 must be statically shaped tensor}}
  %0 = mf.add %a, %a : tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

func.func @broadcast(%a: tensor<3xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{cannot broadcast [3] to [2, 4]: input dim 0 is 3, expected 1 or 4}}
  %0 = mf.broadcast %a : tensor<3xf32> to tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @reduce(%a: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+2 {{inferred type(s) 'tensor<2x1xf32>' are incompatible with return type(s) of operation 'tensor<2x4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mf.reduce_sum %a dim = 1 : tensor<2x4xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @reduce_dim(%a: tensor<2x4xf32>) -> tensor<2x4x1xf32> {
  // expected-error @+2 {{dimension 2 is out of range for a rank-2 operand (expected 0 <= dim < 2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mf.reduce_max %a dim = 2 : tensor<2x4xf32> -> tensor<2x4x1xf32>
  return %0 : tensor<2x4x1xf32>
}

// -----

func.func @reshape(%a: tensor<2x4xf32>) -> tensor<3x3xf32> {
  // expected-error @+1 {{cannot reshape [2, 4] (8 elements) to [3, 3] (9 elements)}}
  %0 = mf.reshape %a : tensor<2x4xf32> to tensor<3x3xf32>
  return %0 : tensor<3x3xf32>
}

// -----

func.func @transpose_perm(%a: tensor<2x4xf32>) -> tensor<4x2xf32> {
  // expected-error @+2 {{[0, 0] is not a permutation of 0..1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mf.transpose %a [0, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

func.func @transpose_shape(%a: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+2 {{inferred type(s) 'tensor<4x2xf32>' are incompatible with return type(s) of operation 'tensor<2x4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mf.transpose %a [1, 0] : tensor<2x4xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @slice(%a: tensor<2x8xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{slice [6, 10) of dim 1 is outside the input's [0, 8)}}
  %0 = mf.slice %a [0, 6] : tensor<2x8xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @concat(%a: tensor<2x8xf32>) -> tensor<2x15xf32> {
  // expected-error @+1 {{inputs add up to 16 along dim 1, result has 15}}
  %0 = mf.concat %a, %a dim = 1 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x15xf32>
  return %0 : tensor<2x15xf32>
}

// -----

func.func @embedding(%t: tensor<256x64xf32>, %ids: tensor<1x8xi32>) -> tensor<1x8x32xf32> {
  // expected-error @+2 {{inferred type(s) 'tensor<1x8x64xf32>' are incompatible with return type(s) of operation 'tensor<1x8x32xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mf.embedding %t, %ids : tensor<256x64xf32>, tensor<1x8xi32> -> tensor<1x8x32xf32>
  return %0 : tensor<1x8x32xf32>
}

// -----

func.func @rms_norm(%x: tensor<1x8x64xf32>, %w: tensor<32xf32>) -> tensor<1x8x64xf32> {
  // expected-error @+1 {{expected weight of shape [64] (the last dim of the input), got [32]}}
  %0 = mf.rms_norm %x, %w eps = 1.0e-05 : tensor<1x8x64xf32>, tensor<32xf32>
  return %0 : tensor<1x8x64xf32>
}

// -----

func.func @rms_norm_type(%x: tensor<1x8x64xf32>, %w: tensor<64xbf16>) -> tensor<1x8x64xf32> {
  // expected-error @+1 {{all of {input, weight} have same element type}}
  %0 = mf.rms_norm %x, %w eps = 1.0e-05 : tensor<1x8x64xf32>, tensor<64xbf16>
  return %0 : tensor<1x8x64xf32>
}

// -----

func.func @matmul_k(%x: tensor<1x8x64xf32>, %w: tensor<128x32xf32>) -> tensor<1x8x128xf32> {
  // expected-error @+2 {{contracting dims differ: lhs has 64, rhs has 32 (check transpose_lhs / transpose_rhs)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mf.matmul %x, %w transpose_rhs : tensor<1x8x64xf32>, tensor<128x32xf32> -> tensor<1x8x128xf32>
  return %0 : tensor<1x8x128xf32>
}

// -----

func.func @matmul_batch(%x: tensor<2x8x64xf32>, %w: tensor<3x64x16xf32>) -> tensor<2x8x16xf32> {
  // expected-error @+2 {{batch dims differ: [2] vs [3]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mf.matmul %x, %w : tensor<2x8x64xf32>, tensor<3x64x16xf32> -> tensor<2x8x16xf32>
  return %0 : tensor<2x8x16xf32>
}

// -----

func.func @matmul_result(%x: tensor<8x64xf32>, %w: tensor<64x16xf32>) -> tensor<8x32xf32> {
  // expected-error @+2 {{inferred type(s) 'tensor<8x16xf32>' are incompatible with return type(s) of operation 'tensor<8x32xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mf.matmul %x, %w : tensor<8x64xf32>, tensor<64x16xf32> -> tensor<8x32xf32>
  return %0 : tensor<8x32xf32>
}

// -----

func.func @matmul_types(%x: tensor<8x64xf16>, %w: tensor<64x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+2 {{expected one element type for operands and result; insert mf.cast to convert}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mf.matmul %x, %w : tensor<8x64xf16>, tensor<64x16xf32> -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

func.func @rope_odd(%x: tensor<1x8x4x15xf32>, %p: tensor<1x8xi32>) -> tensor<1x8x4x15xf32> {
  // expected-error @+1 {{head_dim 15 must be even to rotate pairs}}
  %0 = mf.rope %x, %p theta = 1.0e+04 : tensor<1x8x4x15xf32>, tensor<1x8xi32>
  return %0 : tensor<1x8x4x15xf32>
}

// -----

func.func @rope_scale_count(%x: tensor<1x8x4x8xf32>, %p: tensor<1x8xi32>) -> tensor<1x8x4x8xf32> {
  // expected-error @+1 {{frequency_scale has 3 values; head_dim 8 needs 4}}
  %0 = mf.rope %x, %p theta = 1.0e+04 frequency_scale = [1.0, 0.5, 0.25] : tensor<1x8x4x8xf32>, tensor<1x8xi32>
  return %0 : tensor<1x8x4x8xf32>
}

// -----

func.func @rope_scale_value(%x: tensor<1x8x4x8xf32>, %p: tensor<1x8xi32>) -> tensor<1x8x4x8xf32> {
  // expected-error @+1 {{frequency_scale values must be positive and finite}}
  %0 = mf.rope %x, %p theta = 1.0e+04 frequency_scale = [1.0, 0.5, 0.0, 0.25] : tensor<1x8x4x8xf32>, tensor<1x8xi32>
  return %0 : tensor<1x8x4x8xf32>
}

// -----

func.func @rope_positions(%x: tensor<1x8x4x16xf32>, %p: tensor<1x4xi32>) -> tensor<1x8x4x16xf32> {
  // expected-error @+1 {{expected positions of shape [1, 8] ([batch, seq]), got [1, 4]}}
  %0 = mf.rope %x, %p theta = 1.0e+04 : tensor<1x8x4x16xf32>, tensor<1x4xi32>
  return %0 : tensor<1x8x4x16xf32>
}

// -----

func.func @attention_gqa(%q: tensor<1x8x4x16xf32>, %k: tensor<1x8x3x16xf32>) -> tensor<1x8x4x16xf32> {
  // expected-error @+1 {{query heads (4) must be a multiple of key/value heads (3)}}
  %0 = mf.attention %q, %k, %k causal scale = 2.5e-01 : tensor<1x8x4x16xf32>, tensor<1x8x3x16xf32>
  return %0 : tensor<1x8x4x16xf32>
}

// -----

func.func @attention_head_dim(%q: tensor<1x8x4x16xf32>, %k: tensor<1x8x2x8xf32>) -> tensor<1x8x4x16xf32> {
  // expected-error @+1 {{query head_dim 16 differs from key/value head_dim 8}}
  %0 = mf.attention %q, %k, %k causal scale = 2.5e-01 : tensor<1x8x4x16xf32>, tensor<1x8x2x8xf32>
  return %0 : tensor<1x8x4x16xf32>
}

// -----

func.func @attention_causal(%q: tensor<1x8x4x16xf32>, %k: tensor<1x4x2x16xf32>) -> tensor<1x8x4x16xf32> {
  // expected-error @+1 {{a causal query of length 8 needs at least as many keys, got 4}}
  %0 = mf.attention %q, %k, %k causal scale = 2.5e-01 : tensor<1x8x4x16xf32>, tensor<1x4x2x16xf32>
  return %0 : tensor<1x8x4x16xf32>
}

// -----

func.func @kv_cache(%c: tensor<1x4x2x16xf32>, %u: tensor<1x8x2x16xf32>, %n: tensor<i32>) -> tensor<1x4x2x16xf32> {
  // expected-error @+1 {{update of 8 tokens is longer than the cache (4)}}
  %0 = mf.kv_cache_write %c, %u, %n : tensor<1x4x2x16xf32>, tensor<1x8x2x16xf32>
  return %0 : tensor<1x4x2x16xf32>
}

// -----

func.func @kv_cache_positions(%c: tensor<2x4x2x16xf32>, %u: tensor<2x1x2x16xf32>, %rows: tensor<3xi32>) -> tensor<2x4x2x16xf32> {
  // expected-error @+1 {{position has 3 positions, expected one per batch row (2)}}
  %0 = mf.kv_cache_write %c, %u, %rows : tensor<2x4x2x16xf32>, tensor<2x1x2x16xf32>, tensor<3xi32>
  return %0 : tensor<2x4x2x16xf32>
}

// -----

func.func @attention_positions(%q: tensor<2x1x4x16xf32>, %k: tensor<2x4x2x16xf32>, %rows: tensor<1xi32>) -> tensor<2x1x4x16xf32> {
  // expected-error @+1 {{past_length has 1 positions, expected one per batch row (2)}}
  %0 = mf.attention %q, %k, %k past_length(%rows : tensor<1xi32>) causal scale = 2.5e-01 : tensor<2x1x4x16xf32>, tensor<2x4x2x16xf32>
  return %0 : tensor<2x1x4x16xf32>
}

// -----

func.func @kv_cache_position_rank(%c: tensor<2x4x2x16xf32>, %u: tensor<2x1x2x16xf32>, %rows: tensor<2x1xi32>) -> tensor<2x4x2x16xf32> {
  // expected-error @+1 {{operand #2 must be 0D/1D tensor of 32-bit signless integer values}}
  %0 = mf.kv_cache_write %c, %u, %rows : tensor<2x4x2x16xf32>, tensor<2x1x2x16xf32>, tensor<2x1xi32>
  return %0 : tensor<2x4x2x16xf32>
}

// -----

func.func @kv_cache_heads(%c: tensor<1x4x2x16xf32>, %u: tensor<1x1x4x16xf32>, %n: tensor<i32>) -> tensor<1x4x2x16xf32> {
  // expected-error @+1 {{update shape [1, 1, 4, 16] does not fit cache shape [1, 4, 2, 16] in dim 2}}
  %0 = mf.kv_cache_write %c, %u, %n : tensor<1x4x2x16xf32>, tensor<1x1x4x16xf32>
  return %0 : tensor<1x4x2x16xf32>
}

// -----

func.func @paged_cache_rows(%pool: tensor<16x8x2x16xf32>, %u: tensor<2x1x2x16xf32>, %rows: tensor<2xi32>, %table: tensor<3x4xi32>) -> tensor<16x8x2x16xf32> {
  // expected-error @+1 {{block_table has 3 rows, expected one per batch row (2)}}
  %0 = mf.kv_cache_write %pool, %u, %rows block_table(%table) : tensor<16x8x2x16xf32>, tensor<2x1x2x16xf32>, tensor<2xi32>, tensor<3x4xi32>
  return %0 : tensor<16x8x2x16xf32>
}

// -----

func.func @paged_cache_room(%pool: tensor<16x8x2x16xf32>, %u: tensor<1x40x2x16xf32>, %n: tensor<1xi32>, %table: tensor<1x4xi32>) -> tensor<16x8x2x16xf32> {
  // expected-error @+1 {{block_table maps 4 blocks of 8 positions, fewer than the 40 new tokens}}
  %0 = mf.kv_cache_write %pool, %u, %n block_table(%table) : tensor<16x8x2x16xf32>, tensor<1x40x2x16xf32>, tensor<1xi32>, tensor<1x4xi32>
  return %0 : tensor<16x8x2x16xf32>
}

// -----

func.func @paged_cache_heads(%pool: tensor<16x8x2x16xf32>, %u: tensor<1x1x4x16xf32>, %n: tensor<1xi32>, %table: tensor<1x4xi32>) -> tensor<16x8x2x16xf32> {
  // expected-error @+1 {{update shape [1, 1, 4, 16] does not fit the block pool [16, 8, 2, 16] in dim 2}}
  %0 = mf.kv_cache_write %pool, %u, %n block_table(%table) : tensor<16x8x2x16xf32>, tensor<1x1x4x16xf32>, tensor<1xi32>, tensor<1x4xi32>
  return %0 : tensor<16x8x2x16xf32>
}

// -----

func.func @paged_attention_past(%q: tensor<1x1x4x16xf32>, %pool: tensor<16x8x2x16xf32>, %table: tensor<1x4xi32>) -> tensor<1x1x4x16xf32> {
  // expected-error @+1 {{a block_table needs the past_length of each row}}
  %0 = mf.attention %q, %pool, %pool block_table(%table) causal scale = 2.5e-01 : tensor<1x1x4x16xf32>, tensor<16x8x2x16xf32>, tensor<1x4xi32>
  return %0 : tensor<1x1x4x16xf32>
}

// -----

func.func @paged_attention_table_rank(%q: tensor<1x1x4x16xf32>, %pool: tensor<16x8x2x16xf32>, %n: tensor<1xi32>, %table: tensor<4xi32>) -> tensor<1x1x4x16xf32> {
  // expected-error @+1 {{must be 2D tensor of 32-bit signless integer values}}
  %0 = mf.attention %q, %pool, %pool past_length(%n : tensor<1xi32>) block_table(%table) causal scale = 2.5e-01 : tensor<1x1x4x16xf32>, tensor<16x8x2x16xf32>, tensor<4xi32>
  return %0 : tensor<1x1x4x16xf32>
}

// -----

func.func @cross_entropy(%l: tensor<8x256xf32>, %y: tensor<4xi32>) -> tensor<f32> {
  // expected-error @+2 {{expected labels of shape [8], got [4]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mf.cross_entropy %l, %y ignore_index = -100 : tensor<8x256xf32>, tensor<4xi32> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @softmax(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{dimension 5 is out of range for a rank-2 operand}}
  %0 = mf.softmax %x dim = 5 : tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @iota(%x: tensor<2x4xf32>) -> tensor<2x4xi32> {
  // expected-error @+1 {{dimension 2 is out of range for a rank-2 operand}}
  %0 = mf.iota dim = 2 : tensor<2x4xi32>
  return %0 : tensor<2x4xi32>
}

// -----

func.func @fusion_args(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{expected block arguments of the input types 'tensor<8xf32>'}}
  %0 = mf.fusion elementwise(%a) : (tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%x: tensor<4xf32>):
    %e = mf.exp %x : tensor<4xf32>
    %b = mf.broadcast %e : tensor<4xf32> to tensor<2x4xf32>
    %r = mf.reshape %b : tensor<2x4xf32> to tensor<8xf32>
    mf.yield %r : tensor<8xf32>
  }
  return %0 : tensor<8xf32>
}

// -----

func.func @fusion_yield(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{yields 'tensor<4xf32>' but its results are 'tensor<8xf32>'}}
  %0 = mf.fusion elementwise(%a) : (tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%x: tensor<8xf32>):
    %s = mf.slice %x [0] : tensor<8xf32> -> tensor<4xf32>
    mf.yield %s : tensor<4xf32>
  }
  return %0 : tensor<8xf32>
}

// -----

func.func @rms_norm_grad_type(%x: tensor<1x4x16xf32>, %w: tensor<16xf32>) -> tensor<1x4x16xf32> {
  // expected-error @+1 {{the gradient of the weight must have its type 'tensor<16xf32>', got 'tensor<1x4x16xf32>'}}
  %0 = mf.rms_norm_grad %x, %w, %x eps = 1.0e-05 wrt = 1 : tensor<1x4x16xf32>, tensor<16xf32> -> tensor<1x4x16xf32>
  return %0 : tensor<1x4x16xf32>
}

// -----

func.func @attention_grad_wrt(%q: tensor<1x4x2x8xf32>, %k: tensor<1x4x1x8xf32>) -> tensor<1x4x2x8xf32> {
  // expected-error @+1 {{attribute 'wrt' failed to satisfy constraint}}
  %0 = mf.attention_grad %q, %k, %k, %q scale = 2.5e-01 wrt = 3 : tensor<1x4x2x8xf32>, tensor<1x4x1x8xf32> -> tensor<1x4x2x8xf32>
  return %0 : tensor<1x4x2x8xf32>
}

// -----

func.func @embedding_grad_shape(%ids: tensor<1x4xi32>, %g: tensor<1x3x16xf32>) -> tensor<32x16xf32> {
  // expected-error @+1 {{expected grad 'tensor<1x4x16xf32>' (the ids' shape + [hidden]), got 'tensor<1x3x16xf32>'}}
  %0 = mf.embedding_grad %ids, %g : tensor<1x4xi32>, tensor<1x3x16xf32> -> tensor<32x16xf32>
  return %0 : tensor<32x16xf32>
}

// -----

func.func @pad_outside(%x: tensor<4xf32>) -> tensor<6xf32> {
  // expected-error @+1 {{the input's [4, 8) of dim 0 is outside the result's [0, 6)}}
  %0 = mf.pad %x [4] : tensor<4xf32> -> tensor<6xf32>
  return %0 : tensor<6xf32>
}

// -----

func.func @assign_missing(%v: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nope' does not name an mf.parameter}}
  %0 = mf.assign @nope, %v : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

mf.parameter @w : tensor<4xf32> init = ones
func.func @assign_type(%v: tensor<4xbf16>) -> tensor<4xbf16> {
  // expected-error @+1 {{type 'tensor<4xbf16>' does not match 'tensor<4xf32>' of parameter 'w'}}
  %0 = mf.assign @w, %v : tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

mf.parameter @base : tensor<4xf32> init = ones frozen
func.func @assign_frozen(%v: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{assigns frozen parameter 'base'; frozen parameters are never updated}}
  %0 = mf.assign @base, %v : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

mf.parameter @w : tensor<64x32xf32> init = ones panels
func.func @assign_panels(%v: tensor<64x32xf32>) -> tensor<64x32xf32> {
  // expected-error @+1 {{assigns parameter 'w', which kernels read as panels packed once; a module that updates a weight reads it as stored}}
  %0 = mf.assign @w, %v : tensor<64x32xf32>
  return %0 : tensor<64x32xf32>
}

// -----

// expected-error @+1 {{panels needs a 2-D weight [N, K], not a rank-1 tensor}}
mf.parameter @norm : tensor<64xf32> init = ones panels

// -----

// expected-error @+1 {{panels needs a 2-D weight [N, K], not training state}}
mf.parameter @moment : tensor<64x32xf32> init = zeros state panels

// -----

func.func @fusion_kind(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'kind' [elementwise, matmul, matmul_epilogue, norm, attention, attention_grad]}}
  %0 = mf.fusion blend(%a) : (tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%x: tensor<8xf32>):
    mf.yield %x : tensor<8xf32>
  }
  return %0 : tensor<8xf32>
}

// -----

func.func @fusion_kernel(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{names kernel @cpu::@mfk_9, which the module does not have}}
  %0 = mf.fusion elementwise(%a) {kernel = @cpu::@mfk_9} : (tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%x: tensor<8xf32>):
    mf.yield %x : tensor<8xf32>
  }
  return %0 : tensor<8xf32>
}

// -----

// Sharded parameters and collectives.
mf.parameter @w : tensor<8x4xf32> init = ones sharding(@nogrid, [[1]])
// expected-error @-1 {{'nogrid' does not name a shard.grid}}

// -----

shard.grid @grid(shape = 1x2)
// expected-error @+1 {{grid axis 2 is not an axis of 'grid' (rank 2)}}
mf.parameter @w : tensor<8x4xf32> init = ones sharding(@grid, [[2]])

// -----

shard.grid @grid(shape = 1x3)
// expected-error @+1 {{dimension 0 (8) cannot be split 3 ways}}
mf.parameter @w : tensor<8x4xf32> init = ones sharding(@grid, [[1]])

// -----

shard.grid @grid(shape = 1x2)
// expected-error @+1 {{grid axis 1 is used twice}}
mf.parameter @w : tensor<8x4xf32> init = ones sharding(@grid, [[1], [1]])

// -----

shard.grid @grid(shape = 1x2)
// expected-error @+1 {{split_axes has 3 entries for a rank-2 parameter}}
mf.parameter @w : tensor<8x4xf32> init = ones sharding(@grid, [[], [], [1]])

// -----

shard.grid @grid(shape = 1x2)
mf.parameter @w : tensor<8x4xf32> init = ones sharding(@grid, [[1], []])
func.func @param_block() -> tensor<8x2xf32> {
  // expected-error @+1 {{type 'tensor<8x2xf32>' is neither 'tensor<8x4xf32>' of parameter 'w' nor its block 'tensor<4x4xf32>' on one rank}}
  %0 = mf.param @w : tensor<8x2xf32>
  return %0 : tensor<8x2xf32>
}

// -----

shard.grid @grid(shape = 1x2)
func.func @all_reduce_axis(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{grid axis 5 is not an axis of 'grid' (rank 2)}}
  %0 = mf.all_reduce %x on @grid axes = [5] : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @all_reduce_grid(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'grid' does not name a shard.grid}}
  %0 = mf.all_reduce %x on @grid axes = [1] : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

shard.grid @grid(shape = 1x2)
func.func @all_reduce_no_axes(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{needs at least one grid axis}}
  %0 = mf.all_reduce %x on @grid axes = [] : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

shard.grid @grid(shape = 2x2)
func.func @all_gather_shape(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{expects the whole 'tensor<4x8xf32>' to be 2 blocks 'tensor<4x8xf32>' along dimension 0}}
  %0 = mf.all_gather %x on @grid axes = [0] dim = 0 : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

shard.grid @grid(shape = 2x2)
func.func @reduce_scatter_dim(%x: tensor<4x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{dimension 2 is not a dimension of 'tensor<2x8xf32>'}}
  %0 = mf.reduce_scatter %x on @grid axes = [1] dim = 2 : tensor<4x8xf32> -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

shard.grid @grid(shape = 2x2)
func.func @scatter_axes(%x: tensor<4x8xf32>) -> tensor<1x8xf32> {
  // expected-error @+1 {{grid axis 0 is used twice}}
  %0 = mf.scatter %x on @grid axes = [0, 0] dim = 0 : tensor<4x8xf32> -> tensor<1x8xf32>
  return %0 : tensor<1x8xf32>
}

// -----

shard.grid @grid(shape = 1x2)
// expected-error @+1 {{needs both a grid and split_axes, or neither}}
mf.parameter @w : tensor<4xf32> init = ones {split_axes = #shard<axisarray[[1]]>}

// -----

shard.grid @grid(shape = 1x2)
func.func @vocab_axis(%t: tensor<128x64xf32>, %ids: tensor<1x8xi32>) -> tensor<1x8x64xf32> {
  // expected-error @+1 {{grid axis 2 is not an axis of 'grid' (rank 2)}}
  %0 = mf.embedding %t, %ids vocab on @grid axes = [2] : tensor<128x64xf32>, tensor<1x8xi32> -> tensor<1x8x64xf32>
  return %0 : tensor<1x8x64xf32>
}

// -----

shard.grid @grid(shape = 1x2)
func.func @vocab_axes_alone(%l: tensor<8x128xf32>, %y: tensor<8xi32>) -> tensor<f32> {
  // expected-error @+1 {{names the vocabulary's grid and its axes together (`vocab on @grid axes = [...]`)}}
  %0 = "mf.cross_entropy"(%l, %y) {ignore_index = -100 : i64, grid_axes = array<i16: 1>} : (tensor<8x128xf32>, tensor<8xi32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @vocab_grid(%ids: tensor<1x8xi32>, %g: tensor<1x8x64xf32>) -> tensor<128x64xf32> {
  // expected-error @+1 {{'grid' does not name a shard.grid}}
  %0 = mf.embedding_grad %ids, %g vocab on @grid axes = [1] : tensor<1x8xi32>, tensor<1x8x64xf32> -> tensor<128x64xf32>
  return %0 : tensor<128x64xf32>
}

// -----

shard.grid @grid(shape = 1x2)
// expected-error @+1 {{groups = 3 needs exactly one split dimension}}
mf.parameter @w : tensor<8x24xf32> init = ones sharding(@grid, [[], []] groups = 3)

// -----

shard.grid @grid(shape = 1x2)
// expected-error @+1 {{dimension 1 (9) cannot be split 2 ways in each of its 3 parts}}
mf.parameter @w : tensor<8x9xf32> init = ones sharding(@grid, [[], [1]] groups = 3)

// -----

func.func @top_k_too_many(%p: tensor<6x4xf32>) -> tensor<6x5xf32> {
  // The rule says why; MLIR adds that inference failed.
  // expected-error @+2 {{k = 5 is not in [1, 4] (the last dimension)}}
  // expected-error @+1 {{failed to infer returned types}}
  %v, %i = mf.top_k %p k = 5 : tensor<6x4xf32> -> tensor<6x5xf32>, tensor<6x5xi32>
  return %v : tensor<6x5xf32>
}

// -----

func.func @top_k_wrong_result(%p: tensor<6x4xf32>) -> tensor<6x2xf32> {
  // expected-error @+2 {{inferred type(s) 'tensor<6x2xf32>', 'tensor<6x2xi32>' are incompatible with return type(s) of operation 'tensor<6x2xf32>', 'tensor<6x3xi32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %v, %i = mf.top_k %p k = 2 : tensor<6x4xf32> -> tensor<6x2xf32>, tensor<6x3xi32>
  return %v : tensor<6x2xf32>
}

// -----

func.func @route_offsets(%i: tensor<6x2xi32>) -> tensor<8xi32> {
  // expected-error @+2 {{inferred type(s) 'tensor<6x2xi32>', 'tensor<5xi32>' are incompatible}}
  // expected-error @+1 {{failed to infer returned types}}
  %pos, %off = mf.moe_route %i num_experts = 4 : tensor<6x2xi32> -> tensor<6x2xi32>, tensor<8xi32>
  return %off : tensor<8xi32>
}

// -----

func.func @dispatch_tokens(%x: tensor<5x16xf32>, %pos: tensor<6x2xi32>) -> tensor<12x16xf32> {
  // expected-error @+2 {{positions [6, 2] route 6 tokens, not 5}}
  // expected-error @+1 {{failed to infer returned types}}
  %rows = mf.moe_dispatch %x, %pos : (tensor<5x16xf32>, tensor<6x2xi32>) -> tensor<12x16xf32>
  return %rows : tensor<12x16xf32>
}

// -----

func.func @grouped_offsets(%rows: tensor<12x16xf32>, %off: tensor<4xi32>, %w: tensor<24x16xf32>) -> tensor<12x24xf32> {
  // expected-error @+2 {{expected i32 group offsets of shape [3] (one more than the weights), got [4]}}
  // expected-error @+1 {{failed to infer returned types}}
  %h = mf.grouped_matmul %rows, %off, %w, %w transpose_rhs : tensor<12x16xf32>, tensor<4xi32>, tensor<24x16xf32>, tensor<24x16xf32> -> tensor<12x24xf32>
  return %h : tensor<12x24xf32>
}

// -----

func.func @grouped_weights(%rows: tensor<12x16xf32>, %off: tensor<3xi32>, %w: tensor<24x16xf32>, %v: tensor<24x8xf32>) -> tensor<12x24xf32> {
  // expected-error @+2 {{weight 1 [24, 8] is not [out, 16] of the rows' dtype, like weight 0 [24, 16]}}
  // expected-error @+1 {{failed to infer returned types}}
  %h = mf.grouped_matmul %rows, %off, %w, %v transpose_rhs : tensor<12x16xf32>, tensor<3xi32>, tensor<24x16xf32>, tensor<24x8xf32> -> tensor<12x24xf32>
  return %h : tensor<12x24xf32>
}

// -----

func.func @combine_rows(%o: tensor<10x16xf32>, %pos: tensor<6x2xi32>, %p: tensor<6x2xf32>) -> tensor<6x16xf32> {
  // expected-error @+2 {{positions [6, 2] do not route the 10 rows one to one}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = mf.moe_combine %o, %pos, %p : tensor<10x16xf32>, tensor<6x2xi32>, tensor<6x2xf32> -> tensor<6x16xf32>
  return %y : tensor<6x16xf32>
}

// -----

func.func @top_k_grad_width(%dv: tensor<6x2xf32>, %i: tensor<6x2xi32>) -> tensor<6x1xf32> {
  // expected-error @+2 {{width 1 is narrower than k = 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %dp = mf.top_k_grad %dv, %i width = 1 : tensor<6x2xf32>, tensor<6x2xi32> -> tensor<6x1xf32>
  return %dp : tensor<6x1xf32>
}

// -----

func.func @weight_grad_expert(%dh: tensor<12x24xf32>, %rows: tensor<12x16xf32>, %off: tensor<5xi32>) -> tensor<24x16xf32> {
  // expected-error @+2 {{expert 4 has no group in offsets [5]}}
  // expected-error @+1 {{failed to infer returned types}}
  %dw = mf.grouped_matmul_weight_grad %dh, %rows, %off expert = 4 : tensor<12x24xf32>, tensor<12x16xf32>, tensor<5xi32> -> tensor<24x16xf32>
  return %dw : tensor<24x16xf32>
}

// -----

// expected-error @+1 {{holds i8 values but names no scales (quantized(@scales))}}
mf.parameter @q : tensor<8x4xi8> init = zeros

// -----

// expected-error @+1 {{names scales but holds floats, not i8}}
mf.parameter @q : tensor<8x4xf32> init = zeros quantized(@s)
mf.parameter @s : tensor<8xf32> init = ones

// -----

// expected-error @+1 {{does not fit its scales 's': expected float scales of shape [2, 8], got [8]}}
mf.parameter @q : tensor<8x4xi8> init = zeros quantized(@s group = 2)
mf.parameter @s : tensor<8xf32> init = ones

// -----

// expected-error @+1 {{does not fit its scales 's': group_size 3 does not divide K = 4}}
mf.parameter @q : tensor<8x4xi8> init = zeros quantized(@s group = 3)
mf.parameter @s : tensor<8xf32> init = ones

// -----

func.func @dequantize_scales(%q: tensor<8x4xi8>, %s: tensor<4xf32>) -> tensor<8x4xf32> {
  // expected-error @+2 {{expected float scales of shape [8], got [4]}}
  // expected-error @+1 {{failed to infer returned types}}
  %w = mf.dequantize %q, %s : tensor<8x4xi8>, tensor<4xf32> -> tensor<8x4xf32>
  return %w : tensor<8x4xf32>
}

// -----

func.func @dequantize_group(%q: tensor<8x4xi8>, %s: tensor<8x1xf32>) -> tensor<8x4xf32> {
  // expected-error @+2 {{group_size 3 does not divide K = 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %w = mf.dequantize %q, %s group_size = 3 : tensor<8x4xi8>, tensor<8x1xf32> -> tensor<8x4xf32>
  return %w : tensor<8x4xf32>
}

// -----

func.func @dequantize_int4(%q: tensor<8x4xi8>, %s: tensor<8xf32>) -> tensor<8x4xf32> {
  // An int4 weight [N, K] is i8 [N, K / 2]: here K = 8.
  // expected-error @+2 {{'mf.dequantize' op inferred type(s) 'tensor<8x8xf32>' are incompatible with return type(s) of operation 'tensor<8x4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %w = mf.dequantize %q, %s bits = 4 : tensor<8x4xi8>, tensor<8xf32> -> tensor<8x4xf32>
  return %w : tensor<8x4xf32>
}

// -----

func.func @dequantize_int4_group(%q: tensor<8x4xi8>, %s: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+2 {{group_size 1 does not divide K = 8 in whole bytes}}
  // expected-error @+1 {{failed to infer returned types}}
  %w = mf.dequantize %q, %s group_size = 1 bits = 4 : tensor<8x4xi8>, tensor<8x8xf32> -> tensor<8x8xf32>
  return %w : tensor<8x8xf32>
}

// -----

func.func @dequantize_bits(%q: tensor<8x4xi8>, %s: tensor<8xf32>) -> tensor<8x4xf32> {
  // expected-error @+2 {{bits = 6 is not 8 or 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %w = mf.dequantize %q, %s bits = 6 : tensor<8x4xi8>, tensor<8xf32> -> tensor<8x4xf32>
  return %w : tensor<8x4xf32>
}

// -----

// expected-error @+1 {{quantized to 6 bits; 8 and 4 are supported}}
mf.parameter @q : tensor<8x4xi8> init = zeros quantized(@s bits = 6)
mf.parameter @s : tensor<8xf32> init = ones

// -----

// expected-error @+1 {{does not fit its scales 's': expected float scales of shape [4, 8], got [8, 4]}}
mf.parameter @q : tensor<8x4xi8> init = zeros quantized(@s group = 2 bits = 4)
mf.parameter @s : tensor<8x4xf32> init = ones

// -----

// expected-error @+1 {{has a quantization group or bits but is not quantized}}
mf.parameter @w : tensor<8x4xf32> init = zeros {quant_group = 2 : i64}

// -----

// expected-error @+1 {{a quantized parameter is a weight, not training state}}
mf.parameter @q : tensor<8x4xi8> init = zeros state quantized(@s)
mf.parameter @s : tensor<8xf32> init = ones

// -----

// A column-parallel int8 weight's per-row scales split with its rows.
shard.grid @grid(shape = 1x2)
// expected-error @+1 {{'s' must be split over the grid as this weight's block needs: #shard<axisarray[[1]]>}}
mf.parameter @q : tensor<8x4xi8> init = zeros sharding(@grid, [[1], []]) quantized(@s)
mf.parameter @s : tensor<8xf32> init = ones

// -----

// A row-parallel one's are whole on every rank.
shard.grid @grid(shape = 1x2)
// expected-error @+1 {{'s' must be split over the grid as this weight's block needs: whole on every rank}}
mf.parameter @q : tensor<8x4xi8> init = zeros sharding(@grid, [[], [1]]) quantized(@s)
mf.parameter @s : tensor<8xf32> init = ones sharding(@grid, [[1]])

// -----

// Group scales [K / group, N] of a row-parallel int4 weight split with its
// columns.
shard.grid @grid(shape = 1x2)
// expected-error @+1 {{'s' must be split over the grid as this weight's block needs: #shard<axisarray[[1], []]>}}
mf.parameter @q : tensor<8x4xi8> init = zeros sharding(@grid, [[], [1]]) quantized(@s group = 2 bits = 4)
mf.parameter @s : tensor<4x8xf32> init = ones sharding(@grid, [[], [1]])

// -----

// expected-error @+1 {{scales 'q2' must name a parameter that is not quantized}}
mf.parameter @q : tensor<8x4xi8> init = zeros quantized(@q2)
mf.parameter @q2 : tensor<8x4xi8> init = zeros quantized(@s)
mf.parameter @s : tensor<8xf32> init = ones

// -----

// expected-error @+1 {{a quantized parameter is a 2-D weight [N, K], not a rank-1 tensor}}
mf.parameter @q : tensor<8xi8> init = zeros quantized(@s)
mf.parameter @s : tensor<8xf32> init = ones

// -----

// Per-row values with leading dimensions are activations, not a weight.
// expected-error @+1 {{a quantized parameter is a 2-D weight [N, K], not a rank-3 tensor}}
mf.parameter @q : tensor<2x8x4xi8> init = zeros quantized(@s)
mf.parameter @s : tensor<2x8xf32> init = ones

// -----

func.func @dequantize_rows_of_another_shape(%q: tensor<2x8x64xi8>, %s: tensor<2x4xf32>) -> tensor<2x8x64xf32> {
  // expected-error @+2 {{expected float scales of shape [2, 8], got [2, 4]}}
  // expected-error @+1 {{failed to infer returned types}}
  %x = mf.dequantize %q, %s : tensor<2x8x64xi8>, tensor<2x4xf32> -> tensor<2x8x64xf32>
  return %x : tensor<2x8x64xf32>
}

// -----

func.func @grouped_rows(%q: tensor<2x8x64xi8>, %s: tensor<2x2x8xf32>) -> tensor<2x8x64xf32> {
  // expected-error @+2 {{expected an i8 [N, K] weight, got [2, 8, 64]}}
  // expected-error @+1 {{failed to infer returned types}}
  %x = mf.dequantize %q, %s group_size = 32 : tensor<2x8x64xi8>, tensor<2x2x8xf32> -> tensor<2x8x64xf32>
  return %x : tensor<2x8x64xf32>
}

// -----

func.func @quantize_a_vector(%x: tensor<64xf32>) {
  // expected-error @+2 {{expected a float tensor of rank >= 2, got [64]}}
  // expected-error @+1 {{failed to infer returned types}}
  %q, %s = mf.dynamic_quantize %x : tensor<64xf32> -> tensor<64xi8>, tensor<f32>
  return
}

// -----

func.func @quantize_to_other_scales(%x: tensor<4x64xbf16>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4x64xi8>', 'tensor<4xbf16>' are incompatible with return type(s) of operation 'tensor<4x64xi8>', 'tensor<4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %q, %s = mf.dynamic_quantize %x : tensor<4x64xbf16> -> tensor<4x64xi8>, tensor<4xf32>
  return
}

// -----

// expected-error @+1 {{dot_panels needs an int8 weight [N, K] with one scale per row and K a multiple of 4, read in one layout (not also panels)}}
mf.parameter @q : tensor<8x64xi8> init = zeros panels dot_panels quantized(@s)
mf.parameter @s : tensor<8xf32> init = ones

// -----

// The dot layout takes K four at a time.
// expected-error @+1 {{dot_panels needs an int8 weight [N, K] with one scale per row and K a multiple of 4}}
mf.parameter @q : tensor<8x66xi8> init = zeros dot_panels quantized(@s)
mf.parameter @s : tensor<8xf32> init = ones

// -----

// A pipeline stage belongs on an entry function.
// expected-error @+1 {{'mf.stage' belongs on an entry function}}
mf.parameter @w : tensor<4xf32> init = ones {mf.stage = 0 : i64}

// -----

// expected-error @+1 {{'mf.micro_batches' must be a positive micro-batch count, got 0 : i64}}
module attributes {mf.micro_batches = 0 : i64} {
}

// -----

shard.grid @grid(shape = 2x1)
func.func @all_to_all_segments(%off: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{expects offsets of a positive multiple of 2 segments (one share per rank) plus one, got 'tensor<4xi32>'}}
  %0 = mf.all_to_all_offsets %off on @grid axes = [0] : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

shard.grid @grid(shape = 2x1)
func.func @all_to_all_offsets_differ(%rows: tensor<12x16xf32>, %a: tensor<5xi32>, %b: tensor<3xi32>) -> tensor<24x16xf32> {
  // expected-error @+1 {{expected i32 send and receive offsets of one shape [segments + 1], got [5] and [3]}}
  %0 = mf.all_to_all %rows, %a, %b on @grid axes = [0] : tensor<12x16xf32>, tensor<5xi32>, tensor<3xi32> -> tensor<24x16xf32>
  return %0 : tensor<24x16xf32>
}

// -----

shard.grid @grid(shape = 2x1)
func.func @all_to_all_row_shape(%rows: tensor<12x16xf32>, %a: tensor<5xi32>) -> tensor<24x8xf32> {
  // expected-error @+1 {{expects a result of the rows' dtype and trailing dimensions, got 'tensor<24x8xf32>'}}
  %0 = mf.all_to_all %rows, %a, %a on @grid axes = [0] : tensor<12x16xf32>, tensor<5xi32>, tensor<5xi32> -> tensor<24x8xf32>
  return %0 : tensor<24x8xf32>
}

// -----

func.func @stacked_groups(%rows: tensor<12x16xf32>, %off: tensor<4xi32>, %w: tensor<2x24x16xf32>) -> tensor<12x24xf32> {
  // expected-error @+2 {{expected i32 group offsets of shape [a multiple of 2 plus one] (groups of the stacked weight's experts), got [4]}}
  // expected-error @+1 {{failed to infer returned types}}
  %h = mf.grouped_matmul %rows, %off, %w transpose_rhs : tensor<12x16xf32>, tensor<4xi32>, tensor<2x24x16xf32> -> tensor<12x24xf32>
  return %h : tensor<12x24xf32>
}

// -----

func.func @stacked_gradient(%dh: tensor<12x24xf32>, %rows: tensor<12x16xf32>, %off: tensor<4xi32>) -> tensor<2x24x16xf32> {
  // expected-error @+2 {{a stacked gradient of 2 experts needs expert 0 and a multiple of 2 groups, got expert 0 and offsets [4]}}
  // expected-error @+1 {{failed to infer returned types}}
  %dw = mf.grouped_matmul_weight_grad %dh, %rows, %off expert = 0 stacked = 2 : tensor<12x24xf32>, tensor<12x16xf32>, tensor<4xi32> -> tensor<2x24x16xf32>
  return %dw : tensor<2x24x16xf32>
}

// -----

// expected-error @+1 {{has 3 parts, which must be the slices of a float weight's dimension 0 ('tensor<4x8xf32>')}}
mf.parameter @stack : tensor<4x8xf32> init = ones {parts = ["a", "b", "c"]}

// -----

shard.grid @grid(shape = 2x1)
// expected-error @+1 {{has 2 parts, which must be the slices of a float weight's dimension 0 ('tensor<2x8xf32>')}}
mf.parameter @stack_split : tensor<2x8xf32> init = ones sharding(@grid, [[], [0]]) {parts = ["a", "b"]}

// -----

shard.grid @grid(shape = 1x1x1x2)
func.func @all_to_all_dims_uneven(%x: tensor<1x8x3x16xf32>) -> tensor<1x16x1x16xf32> {
  // expected-error @+1 {{dimension 2 of [1, 8, 3, 16] does not split into 2 blocks}}
  %0 = mf.all_to_all_dims %x on @grid axes = [3] split = 2 concat = 1 : tensor<1x8x3x16xf32> -> tensor<1x16x1x16xf32>
  return %0 : tensor<1x16x1x16xf32>
}

// -----

shard.grid @grid(shape = 1x1x1x2)
func.func @all_to_all_dims_result(%x: tensor<1x8x4x16xf32>) -> tensor<1x8x4x16xf32> {
  // expected-error @+1 {{expects the result [1, 16, 2, 16], got 'tensor<1x8x4x16xf32>'}}
  %0 = mf.all_to_all_dims %x on @grid axes = [3] split = 2 concat = 1 : tensor<1x8x4x16xf32> -> tensor<1x8x4x16xf32>
  return %0 : tensor<1x8x4x16xf32>
}

// -----

shard.grid @grid(shape = 1x1x1x2)
func.func @all_to_all_dims_dimension(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{split and concat dimensions 2 and 0 are not dimensions of [8, 4]}}
  %0 = mf.all_to_all_dims %x on @grid axes = [3] split = 2 concat = 0 : tensor<8x4xf32> -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

shard.grid @grid(shape = 1x1x1x2)
func.func @all_to_all_dims_same(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{split and concat dimensions are both 0; they must differ}}
  %0 = mf.all_to_all_dims %x on @grid axes = [3] split = 0 concat = 0 : tensor<8x4xf32> -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

func.func @quantize_by_other_channels(%x: tensor<4x64xf32>, %s: tensor<32xf32>, %z: tensor<64xi8>) {
  // expected-error @+2 {{expected scales [64] (one per channel: the input's trailing dimensions) in the input's type, got f32 [32]}}
  // expected-error @+1 {{failed to infer returned types}}
  %q = mf.quantize %x, %s, %z : tensor<4x64xf32>, tensor<32xf32>, tensor<64xi8> -> tensor<4x64xi8>
  return
}

// -----

func.func @quantize_with_float_zero_points(%x: tensor<4x64xf32>, %s: tensor<64xf32>, %z: tensor<64xf32>) {
  // expected-error @+1 {{operand #2 must be}}
  %q = mf.quantize %x, %s, %z : tensor<4x64xf32>, tensor<64xf32>, tensor<64xf32> -> tensor<4x64xi8>
  return
}

// -----

// expected-error @+1 {{calibrated activations need int8 values with one scale per row}}
mf.parameter @q : tensor<8x4xi8> init = zeros quantized(@s group = 2 calibrated(@is, @zp, @b))
mf.parameter @s : tensor<2x8xf32> init = ones
mf.parameter @is : tensor<4xf32> init = ones
mf.parameter @zp : tensor<4xi8> init = zeros
mf.parameter @b : tensor<8xf32> init = zeros

// -----

// expected-error @+1 {{input zero points 'zp' must name an i8 parameter [4]}}
mf.parameter @q : tensor<8x4xi8> init = zeros quantized(@s calibrated(@is, @zp, @b))
mf.parameter @s : tensor<8xf32> init = ones
mf.parameter @is : tensor<4xf32> init = ones
mf.parameter @zp : tensor<4xf32> init = zeros
mf.parameter @b : tensor<8xf32> init = zeros

// -----

// expected-error @+1 {{bias 'b' must name a float parameter [8]}}
mf.parameter @q : tensor<8x4xi8> init = zeros quantized(@s calibrated(@is, @zp, @b))
mf.parameter @s : tensor<8xf32> init = ones
mf.parameter @is : tensor<4xf32> init = ones
mf.parameter @zp : tensor<4xi8> init = zeros
mf.parameter @b : tensor<4xf32> init = zeros

// -----

// expected-error @+1 {{smooth = 1.500000e+00 is not a migration strength in [0, 1]}}
mf.parameter @q : tensor<8x4xi8> init = zeros quantized(@s calibrated(@is, @zp, @b smooth = 1.5))
mf.parameter @s : tensor<8xf32> init = ones
mf.parameter @is : tensor<4xf32> init = ones
mf.parameter @zp : tensor<4xi8> init = zeros
mf.parameter @b : tensor<8xf32> init = zeros

// -----

// (Generic form: the custom one cannot leave a companion out.)
// expected-error @+1 {{calibrated activations need input scales, zero points and a bias (calibrated(@scales, @zero_points, @bias))}}
"mf.parameter"() <{init = 0 : i32, quant_scale = @s, quant_input_scale = @is, sym_name = "q", type = tensor<8x4xi8>}> : () -> ()
mf.parameter @s : tensor<8xf32> init = ones
mf.parameter @is : tensor<4xf32> init = ones

// -----

// expected-error @+1 {{a calibrated weight's scales 's' are f32 (they hold the activations' scale too)}}
mf.parameter @q : tensor<8x4xi8> init = zeros quantized(@s calibrated(@is, @zp, @b))
mf.parameter @s : tensor<8xf16> init = ones
mf.parameter @is : tensor<4xf16> init = ones
mf.parameter @zp : tensor<4xi8> init = zeros
mf.parameter @b : tensor<8xf16> init = zeros

// -----

// expected-error @+1 {{bias 'b' must name a float parameter [8] (the input scales and the bias of one type)}}
mf.parameter @q : tensor<8x4xi8> init = zeros quantized(@s calibrated(@is, @zp, @b))
mf.parameter @s : tensor<8xf32> init = ones
mf.parameter @is : tensor<4xf16> init = ones
mf.parameter @zp : tensor<4xi8> init = zeros
mf.parameter @b : tensor<8xf32> init = zeros

// -----

func.func @quantize_by_scales_of_another_type(%x: tensor<4x64xf32>, %s: tensor<64xf16>, %z: tensor<64xi8>) {
  // expected-error @+2 {{expected scales [64] (one per channel: the input's trailing dimensions) in the input's type, got f16 [64]}}
  // expected-error @+1 {{failed to infer returned types}}
  %q = mf.quantize %x, %s, %z : tensor<4x64xf32>, tensor<64xf16>, tensor<64xi8> -> tensor<4x64xi8>
  return
}

// -----

func.func @int8_cache_without_scales(%q: tensor<1x1x4x16xf32>, %k: tensor<1x32x2x16xi8>, %n: tensor<i32>) {
  // expected-error @+1 {{reads an int8 key/value cache without its scales (kv_scales)}}
  %o = mf.attention %q, %k, %k past_length(%n) causal scale = 2.5e-01 : tensor<1x1x4x16xf32>, tensor<1x32x2x16xi8>
  return
}

// -----

func.func @scales_of_a_float_cache(%q: tensor<1x1x4x16xf32>, %k: tensor<1x32x2x16xf32>, %n: tensor<i32>, %s: tensor<2x16xf32>) {
  // expected-error @+1 {{has kv_scales but a float key/value cache, not i8}}
  %o = mf.attention %q, %k, %k past_length(%n) causal scale = 2.5e-01 kv_scales(%s, %s : tensor<2x16xf32>, tensor<2x16xf32>) : tensor<1x1x4x16xf32>, tensor<1x32x2x16xf32>
  return
}

// -----

func.func @scales_per_head_only(%q: tensor<1x1x4x16xf32>, %k: tensor<1x32x2x16xi8>, %n: tensor<i32>, %s: tensor<2xf32>) {
  // expected-error @+1 {{kv_scales must be [2, 16] (a scale per KV head and channel) of the query's type 'f32', got 'tensor<2xf32>'}}
  %o = mf.attention %q, %k, %k past_length(%n) causal scale = 2.5e-01 kv_scales(%s, %s : tensor<2xf32>, tensor<2xf32>) : tensor<1x1x4x16xf32>, tensor<1x32x2x16xi8>
  return
}

// -----

// expected-error @+1 {{calibrated_scales needs a float tensor of scales (not training state) and the name of the calibration's ranges}}
mf.parameter @s : tensor<32xi8> init = zeros calibrated_scales("model.layers.0.attention.attention_core.key")

// -----

// (Generic form: the custom one cannot give one scale alone.)
func.func @key_scale_alone(%q: tensor<1x1x4x16xf32>, %k: tensor<1x32x2x16xi8>, %n: tensor<i32>, %s: tensor<2x16xf32>) {
  // expected-error @+1 {{kv_scales needs the key and the value scales}}
  %o = "mf.attention"(%q, %k, %k, %n, %s) <{causal, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 1, 0>, scale = 2.5e-01 : f64}> : (tensor<1x1x4x16xf32>, tensor<1x32x2x16xi8>, tensor<1x32x2x16xi8>, tensor<i32>, tensor<2x16xf32>) -> tensor<1x1x4x16xf32>
  return
}

// -----

func.func @int8_cache_without_past(%q: tensor<1x1x4x16xf32>, %k: tensor<1x32x2x16xi8>, %s: tensor<2x16xf32>) {
  // expected-error @+1 {{an int8 key/value cache needs the past_length it is read to}}
  %o = mf.attention %q, %k, %k causal scale = 2.5e-01 kv_scales(%s, %s : tensor<2x16xf32>, tensor<2x16xf32>) : tensor<1x1x4x16xf32>, tensor<1x32x2x16xi8>
  return
}
