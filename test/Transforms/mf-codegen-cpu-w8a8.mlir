// RUN: mf-opt %s --pass-pipeline='builtin.module(mf-outline-lone-matmuls,mf-choose-weight-layout{pack-weights=true},mf-codegen-cpu)' | FileCheck %s
// RUN: mf-opt %s --pass-pipeline='builtin.module(mf-outline-lone-matmuls,mf-choose-weight-layout{pack-weights=false},mf-codegen-cpu)' | FileCheck %s --check-prefix=STORED
// RUN: mf-opt %s --pass-pipeline='builtin.module(mf-outline-lone-matmuls,mf-choose-weight-layout{cpu=x86-64-v3})' 2>&1 >/dev/null | FileCheck %s --check-prefix=NOVNNI
// RUN: mf-opt %s --pass-pipeline='builtin.module(mf-outline-lone-matmuls,mf-choose-weight-layout{cpu=sapphirerapids})' 2>&1 >/dev/null | FileCheck %s --allow-empty --check-prefix=VNNI

// W8A8: a region that quantizes its float rows per token and multiplies
// them by an int8 weight calls the int8 dot service, which quantizes the
// tile's rows itself; the weight is read as dot panels (an i8 weight that
// only int8 rows multiply, K a multiple of 4), for several rows and one
// alike; bf16 rows take the _bf16 service. A weight that float rows also
// multiply, or whose K is not a multiple of 4, is read as stored
// (mfrt_gemm_i8i8), as every weight is with --pack-weights=false. The
// kernels apply no scales of their own: the service applies both.
// CHECK: mf.parameter @w : tensor<32x64xi8> init = zeros dot_panels quantized(@w_scale)
// CHECK: mf.parameter @shared : tensor<32x64xi8> init = zeros quantized(@shared_scale)
// CHECK: mf.parameter @odd : tensor<32x66xi8> init = zeros quantized(@odd_scale)
// CHECK: mf.parameter @half : tensor<32x64xi8> init = zeros dot_panels quantized(@half_scale)
// CHECK-LABEL: func.func @rows
// CHECK: mf.fusion matmul(%{{.*}}, %{{.*}}, %{{.*}}) {kernel = @cpu::@[[DOT:mfk_[0-9]+]]}
// CHECK-LABEL: func.func @one_row
// CHECK: mf.fusion matmul(%{{.*}}, %{{.*}}, %{{.*}}) {kernel = @cpu::@[[DOTROW:mfk_[0-9]+]]}
// CHECK-LABEL: func.func @shared_rows
// CHECK: mf.fusion matmul(%{{.*}}, %{{.*}}, %{{.*}}) {kernel = @cpu::@[[SHARED:mfk_[0-9]+]]}
// CHECK-LABEL: func.func @odd_depth
// CHECK: mf.fusion matmul(%{{.*}}, %{{.*}}, %{{.*}}) {kernel = @cpu::@[[ODD:mfk_[0-9]+]]}
// CHECK-LABEL: func.func @bf16
// CHECK: mf.fusion matmul(%{{.*}}, %{{.*}}, %{{.*}}) {kernel = @cpu::@[[BF16:mfk_[0-9]+]]}
// CHECK: mfexec.kernel @[[DOT]] tiles(1) dot_panels [1] : (memref<4x64xf32>, memref<32x64xi8>, memref<32xf32>) -> memref<4x32xf32>
// CHECK: mfexec.kernel @[[BF16]] tiles(1) dot_panels [1] : (memref<4x64xbf16>, memref<32x64xi8>, memref<32xbf16>) -> memref<4x32xbf16>
// CHECK: func.func @[[DOT]](%{{.*}}, %{{.*}}, %{{.*}}: memref<4x64xf32>, %{{.*}}: memref<2048xi8>, %{{.*}}: memref<32xf32>
// CHECK-NOT: arith.mulf
// CHECK: call @mfrt_gemm_i8i8_dot(
// CHECK-NOT: arith.mulf
// CHECK: return
// CHECK: func.func @[[SHARED]](%{{.*}}, %{{.*}}, %{{.*}}: memref<4x64xf32>, %{{.*}}: memref<32x64xi8>
// CHECK: call @mfrt_gemm_i8i8(
// CHECK: func.func @[[ODD]](%{{.*}}, %{{.*}}, %{{.*}}: memref<4x66xf32>, %{{.*}}: memref<32x66xi8>
// CHECK: call @mfrt_gemm_i8i8(
// CHECK: func.func @[[BF16]](
// CHECK: call @mfrt_gemm_i8i8_dot_bf16(
// On a target without AVX512-VNNI the portable loop runs: a warning.
// NOVNNI: warning: int8 activations (W8A8) on a target without AVX512-VNNI ('x86-64-v3'): its int8 dot products widen the bytes to 16 bits (AVX2's vpmaddwd) or run a portable loop, slower than W8A16 (activation_dtype: None) there
// VNNI-NOT: warning
// STORED-NOT: dot_panels
// STORED: call @mfrt_gemm_i8i8(
mf.parameter @w : tensor<32x64xi8> init = zeros quantized(@w_scale)
mf.parameter @w_scale : tensor<32xf32> init = ones
mf.parameter @shared : tensor<32x64xi8> init = zeros quantized(@shared_scale)
mf.parameter @shared_scale : tensor<32xf32> init = ones
mf.parameter @odd : tensor<32x66xi8> init = zeros quantized(@odd_scale)
mf.parameter @odd_scale : tensor<32xf32> init = ones
mf.parameter @half : tensor<32x64xi8> init = zeros quantized(@half_scale)
mf.parameter @half_scale : tensor<32xbf16> init = ones
func.func @rows(%x: tensor<4x64xf32>) -> tensor<4x32xf32> {
  %q, %s = mf.dynamic_quantize %x : tensor<4x64xf32> -> tensor<4x64xi8>, tensor<4xf32>
  %r = mf.dequantize %q, %s : tensor<4x64xi8>, tensor<4xf32> -> tensor<4x64xf32>
  %wq = mf.param @w : tensor<32x64xi8>
  %ws = mf.param @w_scale : tensor<32xf32>
  %w = mf.dequantize %wq, %ws : tensor<32x64xi8>, tensor<32xf32> -> tensor<32x64xf32>
  %y = mf.matmul %r, %w transpose_rhs : tensor<4x64xf32>, tensor<32x64xf32> -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}
func.func @one_row(%x: tensor<1x64xf32>) -> tensor<1x32xf32> {
  %q, %s = mf.dynamic_quantize %x : tensor<1x64xf32> -> tensor<1x64xi8>, tensor<1xf32>
  %r = mf.dequantize %q, %s : tensor<1x64xi8>, tensor<1xf32> -> tensor<1x64xf32>
  %wq = mf.param @w : tensor<32x64xi8>
  %ws = mf.param @w_scale : tensor<32xf32>
  %w = mf.dequantize %wq, %ws : tensor<32x64xi8>, tensor<32xf32> -> tensor<32x64xf32>
  %y = mf.matmul %r, %w transpose_rhs : tensor<1x64xf32>, tensor<32x64xf32> -> tensor<1x32xf32>
  return %y : tensor<1x32xf32>
}
func.func @shared_rows(%x: tensor<4x64xf32>) -> (tensor<4x32xf32>, tensor<4x32xf32>) {
  %q, %s = mf.dynamic_quantize %x : tensor<4x64xf32> -> tensor<4x64xi8>, tensor<4xf32>
  %r = mf.dequantize %q, %s : tensor<4x64xi8>, tensor<4xf32> -> tensor<4x64xf32>
  %wq = mf.param @shared : tensor<32x64xi8>
  %ws = mf.param @shared_scale : tensor<32xf32>
  %w = mf.dequantize %wq, %ws : tensor<32x64xi8>, tensor<32xf32> -> tensor<32x64xf32>
  %y = mf.matmul %r, %w transpose_rhs : tensor<4x64xf32>, tensor<32x64xf32> -> tensor<4x32xf32>
  %wq2 = mf.param @shared : tensor<32x64xi8>
  %ws2 = mf.param @shared_scale : tensor<32xf32>
  %w2 = mf.dequantize %wq2, %ws2 : tensor<32x64xi8>, tensor<32xf32> -> tensor<32x64xf32>
  %z = mf.matmul %x, %w2 transpose_rhs : tensor<4x64xf32>, tensor<32x64xf32> -> tensor<4x32xf32>
  return %y, %z : tensor<4x32xf32>, tensor<4x32xf32>
}
func.func @odd_depth(%x: tensor<4x66xf32>) -> tensor<4x32xf32> {
  %q, %s = mf.dynamic_quantize %x : tensor<4x66xf32> -> tensor<4x66xi8>, tensor<4xf32>
  %r = mf.dequantize %q, %s : tensor<4x66xi8>, tensor<4xf32> -> tensor<4x66xf32>
  %wq = mf.param @odd : tensor<32x66xi8>
  %ws = mf.param @odd_scale : tensor<32xf32>
  %w = mf.dequantize %wq, %ws : tensor<32x66xi8>, tensor<32xf32> -> tensor<32x66xf32>
  %y = mf.matmul %r, %w transpose_rhs : tensor<4x66xf32>, tensor<32x66xf32> -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}
func.func @bf16(%x: tensor<4x64xbf16>) -> tensor<4x32xbf16> {
  %q, %s = mf.dynamic_quantize %x : tensor<4x64xbf16> -> tensor<4x64xi8>, tensor<4xbf16>
  %r = mf.dequantize %q, %s : tensor<4x64xi8>, tensor<4xbf16> -> tensor<4x64xbf16>
  %wq = mf.param @half : tensor<32x64xi8>
  %ws = mf.param @half_scale : tensor<32xbf16>
  %w = mf.dequantize %wq, %ws : tensor<32x64xi8>, tensor<32xbf16> -> tensor<32x64xbf16>
  %y = mf.matmul %r, %w transpose_rhs : tensor<4x64xbf16>, tensor<32x64xbf16> -> tensor<4x32xbf16>
  return %y : tensor<4x32xbf16>
}
