// A module that updates a weight (a training step): packed panels would go
// stale, so mf-choose-weight-layout reads every weight as stored.
mf.parameter @linear.weight : tensor<64x32xf32> init = normal {std = 2.0e-02 : f64}

func.func @step(%x: tensor<4x32xf32>, %new: tensor<64x32xf32>) -> tensor<4x64xf32> {
  %w = mf.param @linear.weight : tensor<64x32xf32>
  %0 = mf.fusion matmul(%x, %w) : (tensor<4x32xf32>, tensor<64x32xf32>) -> tensor<4x64xf32> {
  ^bb0(%a: tensor<4x32xf32>, %b: tensor<64x32xf32>):
    %m = mf.matmul %a, %b transpose_rhs : tensor<4x32xf32>, tensor<64x32xf32> -> tensor<4x64xf32>
    mf.yield %m : tensor<4x64xf32>
  }
  %1 = mf.assign @linear.weight, %new : tensor<64x32xf32>
  return %0 : tensor<4x64xf32>
}
