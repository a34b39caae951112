func.func @silu_add(%a: tensor<4x16xf32>, %b: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = mf.add %a, %b : tensor<4x16xf32>
  %1 = mf.silu %0 : tensor<4x16xf32>
  return %1 : tensor<4x16xf32>
}
