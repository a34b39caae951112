// RUN: mf-opt %s --mf-split-weight-gradients --verify-diagnostics

// An input gradient that writes a parameter cannot run apart from the
// weight gradients.
module attributes {mf.run_mode = #mf.run_mode<train>, mf.micro_batches = 4 : i64, mf.pipeline_scheduler = "zero_bubble_v", mf.pipeline_chunks = 2 : i64} {
  mf.parameter @w : tensor<4xf32> init = ones
  func.func @stage1_chunk0_accumulate_gradients(%x: tensor<4xf32> {mf.name = "hidden"}, %dy: tensor<4xf32> {mf.name = "output_gradient"}) -> (tensor<4xf32> {mf.name = "input_gradient"}) attributes {mf.stage = 1 : i64, mf.chunk = 0 : i64} {
    // expected-error @below {{in the input gradient of a pipeline part has side effects; its weight gradients cannot be split off}}
    %h = mf.assign @w, %dy : tensor<4xf32>
    return %h : tensor<4xf32>
  }
}
