// RUN: mf-opt %s --split-input-file --mf-train-step --verify-diagnostics

// expected-error @below {{a training module needs an 'mf.optimizer'}}
module attributes {mf.run_mode = #mf.run_mode<train>} {
  func.func @forward_backward(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
    %loss = mf.constant dense<1.0> : tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

module attributes {mf.run_mode = #mf.run_mode<train>, mf.optimizer = #mf.optimizer<kind = AdamW, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64, gradient_accumulation_steps = 1>} {
  mf.parameter @w : tensor<4xf32> init = ones
  // expected-error @below {{returns 1 values; expected the loss and one gradient per trained parameter (1)}}
  func.func @forward_backward(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
    %loss = mf.constant dense<1.0> : tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// expected-error @below {{a training module needs forward_backward (run mf-autodiff first)}}
module attributes {mf.run_mode = #mf.run_mode<train>, mf.optimizer = #mf.optimizer<kind = AdamW, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64, gradient_accumulation_steps = 1>} {
}

// The optimizer attribute's own errors: test/Dialect/MF/module-attributes-invalid.mlir.

// -----

// A pipelined module (mf.micro_batches) runs on a data x model x pipeline
// grid: the stages' norms meet over its last axis.
// expected-error @below {{a pipelined module (mf.micro_batches) needs a data x model x pipeline grid}}
module attributes {mf.run_mode = #mf.run_mode<train>, mf.micro_batches = 2 : i64, mf.optimizer = #mf.optimizer<kind = AdamW, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64, gradient_accumulation_steps = 1>} {
  mf.parameter @w : tensor<4xf32> init = ones
  func.func @stage0_forward_backward(%x: tensor<4xf32> {mf.name = "hidden"}) -> (tensor<f32> {mf.name = "loss"}, tensor<4xf32> {mf.name = "grad.w"}) attributes {mf.stage = 0 : i64} {
    %w = mf.param @w : tensor<4xf32>
    %loss = mf.constant dense<1.0> : tensor<f32>
    return %loss, %w : tensor<f32>, tensor<4xf32>
  }
}

// -----

// A parameter read by two of three stages: its gradient's sum over the
// pipeline axis would need the third stage too.
module attributes {mf.run_mode = #mf.run_mode<train>, mf.micro_batches = 3 : i64, mf.optimizer = #mf.optimizer<kind = AdamW, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64, gradient_accumulation_steps = 1>} {
  shard.grid @grid(shape = 1x1x3)
  // expected-error @below {{is read by 2 of the 3 pipeline stages; a parameter shared by some stages but not all is not supported yet}}
  mf.parameter @w : tensor<4xf32> init = ones
  func.func @stage0_forward(%x: tensor<4xf32> {mf.name = "hidden"}) -> (tensor<4xf32> {mf.name = "hidden"}) attributes {mf.stage = 0 : i64} {
    %w = mf.param @w : tensor<4xf32>
    return %w : tensor<4xf32>
  }
  func.func @stage2_forward(%x: tensor<4xf32> {mf.name = "hidden"}) -> (tensor<4xf32> {mf.name = "hidden"}) attributes {mf.stage = 2 : i64} {
    %w = mf.param @w : tensor<4xf32>
    return %w : tensor<4xf32>
  }
  func.func @stage2_forward_backward(%x: tensor<4xf32> {mf.name = "hidden"}) -> (tensor<f32> {mf.name = "loss"}, tensor<4xf32> {mf.name = "grad.w"}) attributes {mf.stage = 2 : i64} {
    %w = mf.param @w : tensor<4xf32>
    %loss = mf.constant dense<1.0> : tensor<f32>
    return %loss, %w : tensor<f32>, tensor<4xf32>
  }
}
