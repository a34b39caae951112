// RUN: mf-opt %s --split-input-file --mf-split-weight-gradients | FileCheck %s

// A part with an input gradient, under zero_bubble_v: B is what the input
// gradient depends on (%t, the gradient through the weight); W the
// weight's gradient and its sum. W reads %t from B (wsaved.0) and the
// saved forward value: it takes B's inputs it reads (saved.0, not the
// hidden states nor the output gradient), then what B saved. The
// parameter read is on both sides; the marks stay.
// CHECK-LABEL: func.func @stage1_chunk0_input_gradients(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<4xf32> {mf.name = "hidden"}, %[[DY:[a-z0-9]+]]: tensor<4xf32> {mf.name = "output_gradient"}, %[[S:[a-z0-9]+]]: tensor<4xf32> {mf.name = "saved.0"})
// CHECK-SAME: -> (tensor<4xf32> {mf.name = "input_gradient"}, tensor<4xf32> {mf.name = "wsaved.0"})
// CHECK-SAME: attributes {mf.chunk = 0 : i64, mf.entry_role = #mf.entry_role<stage_input_gradients>, mf.stage = 1 : i64}
// CHECK: %[[W:.*]] = mf.param @w
// CHECK: %[[T:.*]] = mf.mul %[[DY]], %[[W]]
// CHECK: %[[DX:.*]] = mf.mul %[[T]], %[[S]]
// CHECK: return %[[DX]], %[[T]]
// CHECK-LABEL: func.func @stage1_chunk0_weight_gradients(
// CHECK-SAME: %[[S2:[a-z0-9]+]]: tensor<4xf32> {mf.name = "saved.0"}, %[[T2:[a-z0-9]+]]: tensor<4xf32> {mf.name = "wsaved.0"})
// CHECK-SAME: attributes {mf.chunk = 0 : i64, mf.entry_role = #mf.entry_role<stage_weight_gradients>, mf.stage = 1 : i64}
// CHECK-NOT: mf.param @w :
// CHECK: %[[GW:.*]] = mf.mul %[[T2]], %[[S2]]
// CHECK: %[[SUM:.*]] = mf.param @optimizer.grad_sum.w
// CHECK: %[[NEW:.*]] = mf.add %[[SUM]], %[[GW]]
// CHECK: mf.assign @optimizer.grad_sum.w, %[[NEW]]
// CHECK: return{{$}}
// CHECK-NOT: @stage1_chunk0_accumulate_gradients
// The first part has no input gradient: left whole.
// CHECK-LABEL: func.func @stage0_chunk0_accumulate_gradients(
module attributes {mf.run_mode = #mf.run_mode<train>, mf.micro_batches = 4 : i64, mf.pipeline_scheduler = "zero_bubble_v", mf.pipeline_chunks = 2 : i64} {
  mf.parameter @w : tensor<4xf32> init = ones
  mf.parameter @optimizer.grad_sum.w : tensor<4xf32> init = zeros state
  func.func @stage1_chunk0_accumulate_gradients(%x: tensor<4xf32> {mf.name = "hidden"}, %dy: tensor<4xf32> {mf.name = "output_gradient"}, %s: tensor<4xf32> {mf.name = "saved.0"}) -> (tensor<4xf32> {mf.name = "input_gradient"}) attributes {mf.stage = 1 : i64, mf.chunk = 0 : i64} {
    %w = mf.param @w : tensor<4xf32>
    %t = mf.mul %dy, %w : tensor<4xf32>
    %dx = mf.mul %t, %s : tensor<4xf32>
    %gw = mf.mul %t, %s : tensor<4xf32>
    %sum = mf.param @optimizer.grad_sum.w : tensor<4xf32>
    %new = mf.add %sum, %gw : tensor<4xf32>
    mf.assign @optimizer.grad_sum.w, %new : tensor<4xf32>
    return %dx : tensor<4xf32>
  }
  func.func @stage0_chunk0_accumulate_gradients(%x: tensor<4xf32> {mf.name = "input_ids"}, %dy: tensor<4xf32> {mf.name = "output_gradient"}) attributes {mf.stage = 0 : i64, mf.chunk = 0 : i64} {
    %sum = mf.param @optimizer.grad_sum.w : tensor<4xf32>
    %new = mf.add %sum, %dy : tensor<4xf32>
    mf.assign @optimizer.grad_sum.w, %new : tensor<4xf32>
    return
  }
}

// -----

// Other schedules keep the backward whole.
// CHECK-LABEL: func.func @stage1_chunk0_accumulate_gradients(
module attributes {mf.run_mode = #mf.run_mode<train>, mf.micro_batches = 4 : i64, mf.pipeline_chunks = 2 : i64} {
  func.func @stage1_chunk0_accumulate_gradients(%x: tensor<4xf32> {mf.name = "hidden"}, %dy: tensor<4xf32> {mf.name = "output_gradient"}) -> (tensor<4xf32> {mf.name = "input_gradient"}) attributes {mf.stage = 1 : i64, mf.chunk = 0 : i64} {
    return %dy : tensor<4xf32>
  }
}
