// RUN: mf-opt %s --split-input-file --mf-train-step --verify-diagnostics

// expected-error @below {{a training module needs an 'mf.optimizer' dictionary}}
module attributes {mf.run_mode = "train"} {
  func.func @forward_backward(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
    %loss = mf.constant dense<1.0> : tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// expected-error @below {{mf.optimizer type must be AdamW, AdamWeightDecay, FP32StateAdamWeightDecay or FusedAdamWeightDecay}}
module attributes {mf.run_mode = "train", mf.optimizer = {type = "SGD"}} {
  func.func @forward_backward(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
    %loss = mf.constant dense<1.0> : tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

module attributes {mf.run_mode = "train", mf.optimizer = {type = "AdamW", beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64}} {
  mf.parameter @w : tensor<4xf32> init = ones
  // expected-error @below {{returns 1 values; expected the loss and one gradient per trained parameter (1)}}
  func.func @forward_backward(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
    %loss = mf.constant dense<1.0> : tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// expected-error @below {{a training module needs forward_backward (run mf-autodiff first)}}
module attributes {mf.run_mode = "train", mf.optimizer = {type = "AdamW", beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64}} {
}

// -----

// expected-error @below {{mf.optimizer needs a float 'eps'}}
module attributes {mf.run_mode = "train", mf.optimizer = {type = "AdamW", beta1 = 0.9 : f64, beta2 = 0.999 : f64, weight_decay = 0.0 : f64}} {
  func.func @forward_backward(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
    %loss = mf.constant dense<1.0> : tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// expected-error @below {{mf.optimizer needs betas in [0, 1), a positive max_grad_norm, gradient_accumulation_steps >= 1 and gradient_aggregation_group >= 1}}
module attributes {mf.run_mode = "train", mf.optimizer = {type = "AdamW", beta1 = 1.0 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64}} {
  func.func @forward_backward(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
    %loss = mf.constant dense<1.0> : tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// expected-error @below {{mf.optimizer needs betas in [0, 1), a positive max_grad_norm, gradient_accumulation_steps >= 1 and gradient_aggregation_group >= 1}}
module attributes {mf.run_mode = "train", mf.optimizer = {type = "AdamW", beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64, gradient_aggregation_group = 0 : i64}} {
  func.func @forward_backward(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
    %loss = mf.constant dense<1.0> : tensor<f32>
    return %loss : tensor<f32>
  }
}
