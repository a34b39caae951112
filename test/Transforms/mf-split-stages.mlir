// RUN: mf-opt %s --split-input-file --mf-split-stages | FileCheck %s

// A stage that is not the last: its forward (what `hidden` depends on)
// moves into stage0_forward, which returns `hidden` and the one forward
// value the backward reads (%a: saved.0); the backward takes it after
// output_gradient and loses its forward and its `hidden` result. The
// parameter read is on both sides; the input the backward reads stays its
// argument.
// CHECK-LABEL: func.func @stage0_forward(
// CHECK-SAME: %[[X:.*]]: tensor<4xf32> {mf.name = "input_ids"})
// CHECK-SAME: -> (tensor<4xf32> {mf.name = "hidden"}, tensor<4xf32> {mf.name = "saved.0"})
// CHECK-SAME: attributes {mf.entry_role = #mf.entry_role<stage_forward>, mf.stage = 0 : i64}
// CHECK: %[[A:.*]] = mf.exp %[[X]]
// CHECK: %[[W:.*]] = mf.param @w
// CHECK: %[[H:.*]] = mf.mul %[[A]], %[[W]]
// CHECK: return %[[H]], %[[A]]
// CHECK-LABEL: func.func @stage0_accumulate_gradients(
// CHECK-SAME: %[[X2:[a-z0-9]+]]: tensor<4xf32> {mf.name = "input_ids"}, %[[DY:[a-z0-9]+]]: tensor<4xf32> {mf.name = "output_gradient"}, %[[SAVED:[a-z0-9]+]]: tensor<4xf32> {mf.name = "saved.0"})
// CHECK-NOT: -> (
// CHECK-NOT: mf.exp
// CHECK: %[[GW:.*]] = mf.mul %[[DY]], %[[SAVED]]
// CHECK: mf.assign @optimizer.grad_sum.w, %[[GW]]
// CHECK: return{{$}}
// The last stage's backward is left whole (no output_gradient).
// CHECK-LABEL: func.func @stage1_accumulate_gradients(
// CHECK: mf.exp
module attributes {mf.run_mode = #mf.run_mode<train>, mf.micro_batches = 2 : i64} {
  mf.parameter @w : tensor<4xf32> init = ones
  mf.parameter @optimizer.grad_sum.w : tensor<4xf32> init = zeros state
  func.func @stage0_forward(%x: tensor<4xf32> {mf.name = "input_ids"}) -> (tensor<4xf32> {mf.name = "hidden"}) attributes {mf.stage = 0 : i64} {
    return %x : tensor<4xf32>
  }
  func.func @stage0_accumulate_gradients(%x: tensor<4xf32> {mf.name = "input_ids"}, %dy: tensor<4xf32> {mf.name = "output_gradient"}) -> (tensor<4xf32> {mf.name = "hidden"}) attributes {mf.stage = 0 : i64} {
    %a = mf.exp %x : tensor<4xf32>
    %w = mf.param @w : tensor<4xf32>
    %h = mf.mul %a, %w : tensor<4xf32>
    %gw = mf.mul %dy, %a : tensor<4xf32>
    mf.assign @optimizer.grad_sum.w, %gw : tensor<4xf32>
    return %h : tensor<4xf32>
  }
  func.func @stage1_accumulate_gradients(%x: tensor<4xf32> {mf.name = "hidden"}) -> (tensor<f32> {mf.name = "loss"}) attributes {mf.stage = 1 : i64} {
    %a = mf.exp %x : tensor<4xf32>
    %l = mf.reduce_sum %a dim = 0 : tensor<4xf32> -> tensor<1xf32>
    %s = mf.reshape %l : tensor<1xf32> to tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// A module that is not pipelined is left alone.
// CHECK-LABEL: func.func @accumulate_gradients(
// CHECK: mf.exp
module attributes {mf.run_mode = #mf.run_mode<train>} {
  func.func @accumulate_gradients(%x: tensor<4xf32>, %dy: tensor<4xf32> {mf.name = "output_gradient"}) -> (tensor<4xf32> {mf.name = "hidden"}) {
    %a = mf.exp %x : tensor<4xf32>
    return %a : tensor<4xf32>
  }
}
