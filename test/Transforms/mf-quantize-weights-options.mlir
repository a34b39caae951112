// RUN: not mf-opt %s --mf-quantize-weights="bits=6" 2>&1 | FileCheck %s --check-prefix=BITS
// RUN: not mf-opt %s --mf-quantize-weights="bits=4" 2>&1 | FileCheck %s --check-prefix=NOGROUP
// RUN: not mf-opt %s --mf-quantize-weights="bits=8 group-size=4" 2>&1 | FileCheck %s --check-prefix=TIED
// RUN: mf-opt %s --mf-quantize-weights="bits=8 group-size=4 exclude=lm_head" | FileCheck %s --check-prefix=EXCLUDED

// The pass's options: 8 or 4 bits, int4 only in (even) groups; a tied
// table's lookups read one int8 scale a row, so int8 groups refuse it
// (unless lm_head, which it is, stays float).
// BITS: error: mf-quantize-weights: bits=6 group-size=0 is not supported (8 bits per row or per group; 4 bits per even group)
// NOGROUP: error: mf-quantize-weights: bits=4 group-size=0 is not supported
// TIED: error: mf-quantize-weights: a tied embedding table with int8 scales per group is not supported; add 'lm_head' to modules_to_not_convert
// EXCLUDED: mf.parameter @tied : tensor<16x8xf32>
mf.parameter @tied : tensor<16x8xf32> init = normal {std = 2.000000e-02 : f64}
func.func @tied_table(%ids: tensor<2xi32>) -> tensor<2x16xf32> {
  %t = mf.param @tied : tensor<16x8xf32>
  %e = mf.embedding %t, %ids : tensor<16x8xf32>, tensor<2xi32> -> tensor<2x8xf32>
  %l = mf.matmul %e, %t transpose_rhs : tensor<2x8xf32>, tensor<16x8xf32> -> tensor<2x16xf32>
  return %l : tensor<2x16xf32>
}
