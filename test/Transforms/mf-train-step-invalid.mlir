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
