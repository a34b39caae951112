// gelu(x @ w^T + bias) + residual, with output tiles cut at both edges:
// 300 rows (256 + 44) by 520 columns (256 + 256 + 8): 6 tiles.
func.func @ffn(%x: tensor<3x100x24xf32>, %w: tensor<520x24xf32>, %bias: tensor<520xf32>, %residual: tensor<3x100x520xf32>) -> tensor<3x100x520xf32> {
  %0 = mf.matmul %x, %w transpose_rhs : tensor<3x100x24xf32>, tensor<520x24xf32> -> tensor<3x100x520xf32>
  %1 = mf.broadcast %bias : tensor<520xf32> to tensor<3x100x520xf32>
  %2 = mf.add %0, %1 : tensor<3x100x520xf32>
  %3 = mf.gelu %2 approximate = tanh : tensor<3x100x520xf32>
  %4 = mf.add %3, %residual : tensor<3x100x520xf32>
  return %4 : tensor<3x100x520xf32>
}
