// Decode-shaped products: one row times the rows of a [N, K] weight.
func.func @decode_residual(%x: tensor<1x1x72xf32>, %w: tensor<1900x72xf32>, %r: tensor<1x1x1900xf32>) -> tensor<1x1x1900xf32> {
  %0 = mf.matmul %x, %w transpose_rhs : tensor<1x1x72xf32>, tensor<1900x72xf32> -> tensor<1x1x1900xf32>
  %1 = mf.add %0, %r : tensor<1x1x1900xf32>
  return %1 : tensor<1x1x1900xf32>
}

func.func @decode_bf16(%x: tensor<1x40xbf16>, %w: tensor<37x40xbf16>) -> tensor<1x37xbf16> {
  %0 = mf.matmul %x, %w transpose_rhs : tensor<1x40xbf16>, tensor<37x40xbf16> -> tensor<1x37xbf16>
  return %0 : tensor<1x37xbf16>
}
