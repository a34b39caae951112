// RUN: mf-opt %s --pass-pipeline='builtin.module(mf-outline-lone-matmuls,mf-codegen-cpu)' | FileCheck %s

// A product by a quantized weight gets a kernel that reads the i8 values and
// the scales (the dequantized weight is never stored): several rows call the
// i8 gemm service, one row converts i8 vectors in the kernel's own code;
// both then scale the product's columns. Multiplied by untransposed, a
// scale per weight row would not be an output column's: no kernel. An
// int4 weight has kernels only as panels of a parameter (test/e2e/
// quantized-int4.test): a function argument gets none.
// CHECK: module attributes {mf.kernels_skipped = {"matmul: a quantized weight with int8 scales per group, int4 ones per row, or read otherwise than multiplied by transposed" = 1 : i64, "matmul: an int4 weight that is not packed (--pack-weights=false or a target without the microkernels)" = 1 : i64}}
// CHECK-LABEL: func.func @rows
// CHECK: mf.fusion matmul(%{{.*}}, %{{.*}}, %{{.*}}) {kernel = @cpu::@[[ROWS:mfk_[0-9]+]]}
// CHECK-LABEL: func.func @one_row
// CHECK: mf.fusion matmul(%{{.*}}, %{{.*}}, %{{.*}}) {kernel = @cpu::@[[ROW:mfk_[0-9]+]]}
// CHECK-LABEL: func.func @untransposed
// CHECK-NEXT: mf.dequantize
// CHECK-NEXT: mf.matmul
// CHECK-LABEL: func.func @int4_argument
// CHECK-NEXT: mf.dequantize
// CHECK-NEXT: mf.matmul
// CHECK: func.func private @mfrt_gemm_i8
// CHECK: func.func @[[ROWS]]({{.*}}memref<32x64xi8>, %{{.*}}: memref<32xf32>
// CHECK: call @mfrt_gemm_i8
// CHECK: arith.mulf
// CHECK: func.func @[[ROW]](
// CHECK: arith.sitofp %{{.*}} : vector<16xi8> to vector<16xf32>
// CHECK: arith.mulf
func.func @rows(%x: tensor<4x64xf32>, %q: tensor<32x64xi8>, %s: tensor<32xf32>) -> tensor<4x32xf32> {
  %w = mf.dequantize %q, %s : tensor<32x64xi8>, tensor<32xf32> -> tensor<32x64xf32>
  %y = mf.matmul %x, %w transpose_rhs : tensor<4x64xf32>, tensor<32x64xf32> -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}
func.func @one_row(%x: tensor<1x64xf32>, %q: tensor<32x64xi8>, %s: tensor<32xf32>) -> tensor<1x32xf32> {
  %w = mf.dequantize %q, %s : tensor<32x64xi8>, tensor<32xf32> -> tensor<32x64xf32>
  %y = mf.matmul %x, %w transpose_rhs : tensor<1x64xf32>, tensor<32x64xf32> -> tensor<1x32xf32>
  return %y : tensor<1x32xf32>
}
func.func @untransposed(%x: tensor<4x32xf32>, %q: tensor<32x64xi8>, %s: tensor<32xf32>) -> tensor<4x64xf32> {
  %w = mf.dequantize %q, %s : tensor<32x64xi8>, tensor<32xf32> -> tensor<32x64xf32>
  %y = mf.matmul %x, %w : tensor<4x32xf32>, tensor<32x64xf32> -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}
func.func @int4_argument(%x: tensor<4x64xf32>, %q: tensor<32x32xi8>, %s: tensor<2x32xf32>) -> tensor<4x32xf32> {
  %w = mf.dequantize %q, %s group_size = 32 bits = 4 : tensor<32x32xi8>, tensor<2x32xf32> -> tensor<32x64xf32>
  %y = mf.matmul %x, %w transpose_rhs : tensor<4x64xf32>, tensor<32x64xf32> -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}
