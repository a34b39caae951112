// An mf module written by hand, without the settings the frontend records.
func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> attributes {mf.entry_role = #mf.entry_role<logits>} {
  return %x : tensor<2xf32>
}
