// RUN: mf-opt %s --split-input-file --mf-split-stages --verify-diagnostics

// A stage's backward must return the stage's output (mf-autodiff's
// pipeline form) for the pass to find its forward.
module attributes {mf.run_mode = #mf.run_mode<train>, mf.micro_batches = 2 : i64} {
  // expected-error @below {{returns no 'hidden' (its stage's output)}}
  func.func @stage0_accumulate_gradients(%x: tensor<4xf32> {mf.name = "input_ids"}, %dy: tensor<4xf32> {mf.name = "output_gradient"}) attributes {mf.stage = 0 : i64} {
    return
  }
}

// -----

// A forward that writes a parameter cannot run apart from its backward.
module attributes {mf.run_mode = #mf.run_mode<train>, mf.micro_batches = 2 : i64} {
  mf.parameter @w : tensor<4xf32> init = ones
  func.func @stage0_accumulate_gradients(%x: tensor<4xf32> {mf.name = "input_ids"}, %dy: tensor<4xf32> {mf.name = "output_gradient"}) -> (tensor<4xf32> {mf.name = "hidden"}) attributes {mf.stage = 0 : i64} {
    // expected-error @below {{in a pipeline stage's forward has side effects; the stage cannot be split}}
    %h = mf.assign @w, %x : tensor<4xf32>
    return %h : tensor<4xf32>
  }
}
