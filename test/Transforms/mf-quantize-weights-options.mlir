// RUN: not mf-opt %s --mf-quantize-weights="bits=6" 2>&1 | FileCheck %s --check-prefix=BITS
// RUN: not mf-opt %s --mf-quantize-weights="bits=4" 2>&1 | FileCheck %s --check-prefix=NOGROUP
// RUN: not mf-opt %s --mf-quantize-weights="bits=8 group-size=4" 2>&1 | FileCheck %s --check-prefix=TIED
// RUN: mf-opt %s --mf-quantize-weights="bits=8 group-size=4 exclude=lm_head" | FileCheck %s --check-prefix=EXCLUDED
// RUN: not mf-opt %s --mf-quantize-weights="activations=dynamic" 2>&1 | FileCheck %s --check-prefix=ACTIVATIONS
// RUN: not mf-opt %s --mf-quantize-weights="activations=per-token bits=4 group-size=32" 2>&1 | FileCheck %s --check-prefix=A8W4
// RUN: mf-opt %s --mf-quantize-weights="activations=per-token" | FileCheck %s --check-prefix=TIEDA8
// RUN: not mf-opt %s --mf-quantize-weights="smooth-alpha=0.5" 2>&1 | FileCheck %s --check-prefix=SMOOTHALONE
// RUN: not mf-opt %s --mf-quantize-weights="activations=per-tensor" 2>&1 | FileCheck %s --check-prefix=STATICTIED

// The pass's options: 8 or 4 bits, int4 only in (even) groups; a tied
// table's lookups read one int8 scale a row, so int8 groups refuse it
// (unless lm_head, which it is, stays float).
// BITS: error: mf-quantize-weights: bits=6 group-size=0 is not supported (8 bits per row or per group; 4 bits per even group)
// NOGROUP: error: mf-quantize-weights: bits=4 group-size=0 is not supported
// TIED: error: mf-quantize-weights: a tied embedding table with int8 scales per group is not supported; add 'lm_head' to modules_to_not_convert
// EXCLUDED: mf.parameter @tied : tensor<16x8xf32>
// int8 activations: per token, and only with int8 weights per row; a tied
// table's lm_head then multiplies rows quantized per token (its lookups
// read the table's rows as W8A16's do).
// ACTIVATIONS: error: mf-quantize-weights: activations is none, per-token or per-tensor, not 'dynamic'
// SMOOTHALONE: error: mf-quantize-weights: smooth-alpha=5.000000e-01 needs activations=per-tensor and a value in [0, 1]
// STATICTIED: error: mf-quantize-weights: a tied embedding table with calibrated int8 activations is not supported
// A8W4: error: mf-quantize-weights: int8 activations take int8 weights with one scale per row (bits=8 group-size=0), as golden-stick's W8A8
// TIEDA8: mf.dynamic_quantize %{{.*}} : tensor<2x8xf32> -> tensor<2x8xi8>, tensor<2xf32>
mf.parameter @tied : tensor<16x8xf32> init = normal {std = 2.000000e-02 : f64}
func.func @tied_table(%ids: tensor<2xi32>) -> tensor<2x16xf32> {
  %t = mf.param @tied : tensor<16x8xf32>
  %e = mf.embedding %t, %ids : tensor<16x8xf32>, tensor<2xi32> -> tensor<2x8xf32>
  %l = mf.matmul %e, %t transpose_rhs : tensor<2x8xf32>, tensor<16x8xf32> -> tensor<2x16xf32>
  return %l : tensor<2x16xf32>
}
