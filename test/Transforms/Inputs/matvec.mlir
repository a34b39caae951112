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

// Weights stored [K, N] (GPT-2's Conv1D): read by rows of w.
func.func @decode_columns(%x: tensor<1x1x100xf32>, %w: tensor<100x1400xf32>, %b: tensor<1400xf32>) -> tensor<1x1x1400xf32> {
  %0 = mf.matmul %x, %w : tensor<1x1x100xf32>, tensor<100x1400xf32> -> tensor<1x1x1400xf32>
  %1 = mf.broadcast %b : tensor<1400xf32> to tensor<1x1x1400xf32>
  %2 = mf.add %0, %1 : tensor<1x1x1400xf32>
  return %2 : tensor<1x1x1400xf32>
}

func.func @decode_columns_f16(%x: tensor<1x24xf16>, %w: tensor<24x50xf16>) -> tensor<1x50xf16> {
  %0 = mf.matmul %x, %w : tensor<1x24xf16>, tensor<24x50xf16> -> tensor<1x50xf16>
  return %0 : tensor<1x50xf16>
}
