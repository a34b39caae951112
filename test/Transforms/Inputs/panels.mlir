// Products by parameters that every reader multiplies by transposed: the
// kernels read them as panels [P, K, 32] that the runtime packs once.
mf.parameter @decode.weight : tensor<1960x72xf32> init = normal {std = 2.000000e-02 : f64}
mf.parameter @prefill.weight : tensor<1960x72xf32> init = normal {std = 2.000000e-02 : f64}
mf.parameter @tied.weight : tensor<300x72xf32> init = normal {std = 2.000000e-02 : f64}

// One row (decode): the kernel streams the panels itself.
func.func @decode_panels(%x: tensor<1x1x72xf32>, %r: tensor<1x1x1960xf32>) -> tensor<1x1x1960xf32> {
  %w = mf.param @decode.weight : tensor<1960x72xf32>
  %0 = mf.matmul %x, %w transpose_rhs : tensor<1x1x72xf32>, tensor<1960x72xf32> -> tensor<1x1x1960xf32>
  %1 = mf.add %0, %r : tensor<1x1x1960xf32>
  return %1 : tensor<1x1x1960xf32>
}

// Several rows (prefill): the panel gemm service, then the epilogue.
func.func @prefill_panels(%x: tensor<1x40x72xf32>, %r: tensor<1x40x1960xf32>) -> tensor<1x40x1960xf32> {
  %w = mf.param @prefill.weight : tensor<1960x72xf32>
  %0 = mf.matmul %x, %w transpose_rhs : tensor<1x40x72xf32>, tensor<1960x72xf32> -> tensor<1x40x1960xf32>
  %1 = mf.add %0, %r : tensor<1x40x1960xf32>
  return %1 : tensor<1x40x1960xf32>
}

// A parameter that is also gathered from stays as stored.
func.func @tied(%x: tensor<1x40x72xf32>, %ids: tensor<1x4xi32>) -> (tensor<1x40x300xf32>, tensor<1x4x72xf32>) {
  %w = mf.param @tied.weight : tensor<300x72xf32>
  %e = mf.embedding %w, %ids : tensor<300x72xf32>, tensor<1x4xi32> -> tensor<1x4x72xf32>
  %0 = mf.matmul %x, %w transpose_rhs : tensor<1x40x72xf32>, tensor<300x72xf32> -> tensor<1x40x300xf32>
  return %0, %e : tensor<1x40x300xf32>, tensor<1x4x72xf32>
}

// 16-bit parameters: bf16 one row (the kernel widens the panels it
// streams), f16 rows through the f16 panel service.
mf.parameter @decode16.weight : tensor<37x40xbf16> init = normal {std = 2.000000e-02 : f64}
mf.parameter @prefill16.weight : tensor<50x24xf16> init = normal {std = 2.000000e-02 : f64}

func.func @decode_panels_bf16(%x: tensor<1x40xbf16>) -> tensor<1x37xbf16> {
  %w = mf.param @decode16.weight : tensor<37x40xbf16>
  %0 = mf.matmul %x, %w transpose_rhs : tensor<1x40xbf16>, tensor<37x40xbf16> -> tensor<1x37xbf16>
  return %0 : tensor<1x37xbf16>
}

func.func @prefill_panels_f16(%x: tensor<300x24xf16>) -> tensor<300x50xf16> {
  %w = mf.param @prefill16.weight : tensor<50x24xf16>
  %0 = mf.matmul %x, %w transpose_rhs : tensor<300x24xf16>, tensor<50x24xf16> -> tensor<300x50xf16>
  return %0 : tensor<300x50xf16>
}
