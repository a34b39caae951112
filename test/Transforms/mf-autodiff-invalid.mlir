// RUN: mf-opt %s --split-input-file --mf-autodiff --verify-diagnostics

// An op without a rule the loss depends on is an error at the op.
module attributes {mf.run_mode = #mf.run_mode<train>} {
  mf.parameter @w : tensor<4x8xf32> init = ones
  func.func @forward_loss(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
    %w = mf.param @w : tensor<4x8xf32>
    // expected-error @below {{has no gradient rule}}
    %m = mf.reduce_max %w dim = 1 : tensor<4x8xf32> -> tensor<4x1xf32>
    %r = mf.reshape %m : tensor<4x1xf32> to tensor<4x1xf32>
    %flat = mf.reshape %labels : tensor<1x4xi32> to tensor<4xi32>
    %loss = mf.cross_entropy %r, %flat ignore_index = -100 : tensor<4x1xf32>, tensor<4xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// A serving KV cache (one past length per row, or pages) has no gradient:
// training graphs attend without one (one scalar past length, context
// parallelism's, has one).
module attributes {mf.run_mode = #mf.run_mode<train>} {
  mf.parameter @q : tensor<1x1x1x16xf32> init = ones
  func.func @forward_loss(%ids: tensor<1x1xi32>, %labels: tensor<1x1xi32>) -> tensor<f32> {
    %q = mf.param @q : tensor<1x1x1x16xf32>
    %past = mf.constant dense<0> : tensor<1xi32>
    // expected-error @below {{has no gradient rule with a KV cache (per-row past_length, block_table)}}
    %o = mf.attention %q, %q, %q past_length(%past : tensor<1xi32>) causal scale = 2.5e-01 : tensor<1x1x1x16xf32>, tensor<1x1x1x16xf32>
    %r = mf.reshape %o : tensor<1x1x1x16xf32> to tensor<1x16xf32>
    %flat = mf.reshape %labels : tensor<1x1xi32> to tensor<1xi32>
    %loss = mf.cross_entropy %r, %flat ignore_index = -100 : tensor<1x16xf32>, tensor<1xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}
