// Norm regions over 600 rows of 64 (three row tiles each), and of 60.
func.func @rms(%a: tensor<600x64xf32>, %b: tensor<600x64xf32>, %w: tensor<64xf32>) -> tensor<600x64xf32> {
  %x = mf.add %a, %b : tensor<600x64xf32>
  %n = mf.rms_norm %x, %w eps = 1.0e-05 : tensor<600x64xf32>, tensor<64xf32>
  %y = mf.silu %n : tensor<600x64xf32>
  return %y : tensor<600x64xf32>
}

// The input itself read again after the norm (a residual).
func.func @layer(%a: tensor<600x64xf32>, %w: tensor<64xf32>, %bias: tensor<64xf32>) -> tensor<600x64xf32> {
  %t = mf.tanh %a : tensor<600x64xf32>
  %n = mf.layer_norm %t, %w, %bias eps = 1.0e-05 : tensor<600x64xf32>, tensor<64xf32>
  %y = mf.add %n, %t : tensor<600x64xf32>
  return %y : tensor<600x64xf32>
}

func.func @softmax(%a: tensor<600x64xf32>) -> tensor<600x64xf32> {
  %half = mf.constant dense<0.5> : tensor<600x64xf32>
  %x = mf.mul %a, %half : tensor<600x64xf32>
  %p = mf.softmax %x dim = 1 : tensor<600x64xf32>
  %y = mf.mul %p, %half : tensor<600x64xf32>
  return %y : tensor<600x64xf32>
}

// Rows of 60 (not a multiple of the 8 lanes): the reduction runs in order.
func.func @rms_odd(%a: tensor<600x60xf32>, %b: tensor<600x60xf32>, %w: tensor<60xf32>) -> tensor<600x60xf32> {
  %x = mf.add %a, %b : tensor<600x60xf32>
  %n = mf.rms_norm %x, %w eps = 1.0e-05 : tensor<600x60xf32>, tensor<60xf32>
  %y = mf.silu %n : tensor<600x60xf32>
  return %y : tensor<600x60xf32>
}
