// RUN: mf-opt %s --pass-pipeline='builtin.module(mf-outline-lone-matmuls,mf-codegen-cpu)' | FileCheck %s

// A product by a quantized weight gets a kernel that reads the i8 values and
// the scales (the dequantized weight is never stored): several rows call the
// i8 gemm service, one row converts i8 vectors in the kernel's own code;
// both then scale the product's columns. Multiplied by untransposed, a
// scale per weight row would not be an output column's: no kernel. An
// int4 weight as stored (not a packed parameter, e.g. a tied table): f32
// rows call the i4 gemm service (which applies the group scales), one row
// splits each 16 bytes' nibbles in the kernel's own code; bf16 rows get no
// kernel. (Packed int4 parameters: test/e2e/quantized-int4.test.)
// CHECK: module attributes {mf.kernels_skipped = {"matmul: a quantized weight with int8 scales per group, int4 ones per row, or read otherwise than multiplied by transposed" = 1 : i64, "matmul: an int4 weight that is not packed (--pack-weights=false, a target without the microkernels, or a table lookups read) with f16/bf16 rows or groups not of 32" = 1 : i64}}
// CHECK-LABEL: func.func @rows
// CHECK: mf.fusion matmul(%{{.*}}, %{{.*}}, %{{.*}}) {kernel = @cpu::@[[ROWS:mfk_[0-9]+]]}
// CHECK-LABEL: func.func @one_row
// CHECK: mf.fusion matmul(%{{.*}}, %{{.*}}, %{{.*}}) {kernel = @cpu::@[[ROW:mfk_[0-9]+]]}
// CHECK-LABEL: func.func @untransposed
// CHECK-NEXT: mf.dequantize
// CHECK-NEXT: mf.matmul
// CHECK-LABEL: func.func @int4_rows
// CHECK: mf.fusion matmul(%{{.*}}, %{{.*}}, %{{.*}}) {kernel = @cpu::@[[I4ROWS:mfk_[0-9]+]]}
// CHECK-LABEL: func.func @int4_one_row
// CHECK: mf.fusion matmul(%{{.*}}, %{{.*}}, %{{.*}}) {kernel = @cpu::@[[I4ROW:mfk_[0-9]+]]}
// CHECK-LABEL: func.func @int4_bf16_rows
// CHECK-NEXT: mf.dequantize
// CHECK-NEXT: mf.matmul
// CHECK: func.func private @mfrt_gemm_i8
// CHECK: func.func @[[ROWS]]({{.*}}memref<32x64xi8>, %{{.*}}: memref<32xf32>
// CHECK: call @mfrt_gemm_i8
// CHECK: arith.mulf
// CHECK: func.func @[[ROW]](
// CHECK: arith.sitofp %{{.*}} : vector<16xi8> to vector<16xf32>
// CHECK: arith.mulf
// CHECK: func.func @[[I4ROWS]]({{.*}}memref<32x32xi8>, %{{.*}}: memref<2x32xf32>
// CHECK: call @mfrt_gemm_i4
// CHECK: func.func @[[I4ROW]](
// CHECK: vector.shuffle
// CHECK: arith.extsi %{{.*}} : vector<16xi8> to vector<16xi32>
// CHECK: arith.shrsi
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
func.func @int4_rows(%x: tensor<4x64xf32>, %q: tensor<32x32xi8>, %s: tensor<2x32xf32>) -> tensor<4x32xf32> {
  %w = mf.dequantize %q, %s group_size = 32 bits = 4 : tensor<32x32xi8>, tensor<2x32xf32> -> tensor<32x64xf32>
  %y = mf.matmul %x, %w transpose_rhs : tensor<4x64xf32>, tensor<32x64xf32> -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}
func.func @int4_one_row(%x: tensor<1x64xf32>, %q: tensor<32x32xi8>, %s: tensor<2x32xf32>) -> tensor<1x32xf32> {
  %w = mf.dequantize %q, %s group_size = 32 bits = 4 : tensor<32x32xi8>, tensor<2x32xf32> -> tensor<32x64xf32>
  %y = mf.matmul %x, %w transpose_rhs : tensor<1x64xf32>, tensor<32x64xf32> -> tensor<1x32xf32>
  return %y : tensor<1x32xf32>
}
func.func @int4_bf16_rows(%x: tensor<4x64xbf16>, %q: tensor<32x32xi8>, %s: tensor<2x32xbf16>) -> tensor<4x32xbf16> {
  %w = mf.dequantize %q, %s group_size = 32 bits = 4 : tensor<32x32xi8>, tensor<2x32xbf16> -> tensor<32x64xbf16>
  %y = mf.matmul %x, %w transpose_rhs : tensor<4x64xbf16>, tensor<32x64xbf16> -> tensor<4x32xbf16>
  return %y : tensor<4x32xbf16>
}
