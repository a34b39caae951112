// RUN: mf-opt %s --split-input-file --mf-train-step | FileCheck %s

// AdamW with clipping: state parameters after the model's, then train_step
// with the host's learning rate and step; the global norm over both
// gradients, the scale min(max_norm / (norm + 1e-6), 1), the bias
// corrections from the step, and per trained parameter new m, v and weight
// stored by mf.assign (the frozen one is neither updated nor given state).
// CHECK: mf.parameter @frozen : tensor<2xf32> init = ones frozen
// CHECK: mf.parameter @optimizer.m.w : tensor<4x8xf32> init = zeros state
// CHECK: mf.parameter @optimizer.v.w : tensor<4x8xf32> init = zeros state
// CHECK: mf.parameter @optimizer.m.b : tensor<8xf32> init = zeros state
// CHECK-NOT: optimizer.{{.*}}frozen
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[LR:[a-z0-9]+]]: tensor<f32> {mf.name = "learning_rate"}, %[[STEP:[a-z0-9]+]]: tensor<f32> {mf.name = "step"})
// CHECK-SAME: -> (tensor<f32> {mf.name = "loss"}, tensor<f32> {mf.name = "grad_norm"})
// CHECK: mf.reduce_sum
// CHECK: mf.reduce_sum
// CHECK: %[[NORM:.+]] = mf.sqrt %{{.*}} : tensor<f32>
// CHECK: mf.min
// CHECK: mf.mul %[[STEP]], %{{.*}} : tensor<f32>
// CHECK: mf.exp
// CHECK: mf.div %[[LR]], %{{.*}} : tensor<f32>
// CHECK: mf.param @optimizer.m.w
// CHECK: mf.sqrt %{{.*}} : tensor<4x8xf32>
// CHECK: mf.assign @optimizer.m.w, %{{.*}} : tensor<4x8xf32>
// CHECK: mf.assign @optimizer.v.w, %{{.*}} : tensor<4x8xf32>
// CHECK: mf.assign @w, %{{.*}} : tensor<4x8xf32>
// CHECK: mf.assign @b, %{{.*}} : tensor<8xf32>
// CHECK-NOT: mf.assign @frozen
// CHECK: return %{{.*}}, %[[NORM]] : tensor<f32>, tensor<f32>
module attributes {mf.run_mode = #mf.run_mode<train>, mf.optimizer = #mf.optimizer<kind = AdamW, beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-8 : f64, weight_decay = 0.1 : f64, gradient_accumulation_steps = 1, max_grad_norm = 1.0 : f64>} {
  mf.parameter @w : tensor<4x8xf32> init = ones
  mf.parameter @b : tensor<8xf32> init = zeros
  mf.parameter @frozen : tensor<2xf32> init = ones frozen
  func.func @forward_backward(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> (tensor<f32>, tensor<4x8xf32>, tensor<8xf32>) {
    %w = mf.param @w : tensor<4x8xf32>
    %b = mf.param @b : tensor<8xf32>
    %loss = mf.constant dense<1.0> : tensor<f32>
    return %loss, %w, %b : tensor<f32>, tensor<4x8xf32>, tensor<8xf32>
  }
}

// -----

// MindSpore's AdamWeightDecay with two micro-batches: no bias correction;
// accumulate_gradients adds gradient / 2 to the sums, train_step adds the
// last micro-batch, updates a bf16 weight in f32 and clears the sums.
// CHECK: mf.parameter @optimizer.grad_sum.w : tensor<4xf32> init = zeros state
// CHECK-LABEL: func.func @accumulate_gradients(
// CHECK-SAME: -> (tensor<f32> {mf.name = "loss"})
// CHECK: %[[G:.+]] = mf.cast %{{.*}} : tensor<4xbf16> to tensor<4xf32>
// CHECK: %[[SHARE:.+]] = mf.div %[[G]], %{{.*}} : tensor<4xf32>
// CHECK: %[[SUM:.+]] = mf.param @optimizer.grad_sum.w
// CHECK: %[[NEW:.+]] = mf.add %[[SUM]], %[[SHARE]]
// CHECK: mf.assign @optimizer.grad_sum.w, %[[NEW]]
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: -> (tensor<f32> {mf.name = "loss"})
// CHECK-NOT: mf.exp
// CHECK: mf.cast %{{.*}} : tensor<4xf32> to tensor<4xbf16>
// CHECK: mf.assign @w, %{{.*}} : tensor<4xbf16>
// CHECK: %[[ZERO:.+]] = mf.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK: mf.assign @optimizer.grad_sum.w, %[[ZERO]]
module attributes {mf.run_mode = #mf.run_mode<finetune>, mf.optimizer = #mf.optimizer<kind = AdamWeightDecay, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-6 : f64, weight_decay = 0.0 : f64, gradient_accumulation_steps = 2>} {
  mf.parameter @w : tensor<4xbf16> init = ones
  func.func @forward_backward(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> (tensor<f32>, tensor<4xbf16>) {
    %w = mf.param @w : tensor<4xbf16>
    %loss = mf.constant dense<1.0> : tensor<f32>
    return %loss, %w : tensor<f32>, tensor<4xbf16>
  }
}

// -----

// Not training: nothing to do.
// CHECK-LABEL: func.func @prefill
// CHECK-NOT: train_step
module attributes {mf.run_mode = #mf.run_mode<predict>} {
  func.func @prefill(%ids: tensor<1x4xi32>) -> tensor<1x4xi32> {
    return %ids : tensor<1x4xi32>
  }
}
