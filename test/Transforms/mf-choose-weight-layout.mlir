// RUN: mf-opt %s --pass-pipeline='builtin.module(mf-choose-weight-layout{pack-weights=true})' | FileCheck %s
// RUN: mf-opt %s --pass-pipeline='builtin.module(mf-choose-weight-layout{pack-weights=false})' | FileCheck %s --check-prefix=STORED
// RUN: mf-opt %s --pass-pipeline='builtin.module(mf-choose-weight-layout{cpu=skylake-avx512})' | FileCheck %s
// RUN: mf-opt %s --pass-pipeline='builtin.module(mf-choose-weight-layout{cpu=x86-64-v3})' | FileCheck %s
// RUN: mf-opt %s --pass-pipeline='builtin.module(mf-choose-weight-layout{cpu=x86-64})' | FileCheck %s --check-prefix=STORED
// RUN: mf-opt %S/Inputs/assigns-weight.mlir --pass-pipeline='builtin.module(mf-choose-weight-layout{pack-weights=true})' | FileCheck %s --check-prefix=STORED
// RUN: not mf-opt %s --pass-pipeline='builtin.module(mf-choose-weight-layout{pack-weights=maybe})' 2>&1 | FileCheck %s --check-prefix=BAD

// Which weights Graph Mode's kernels read as panels: those every reader
// multiplies by transposed in a matmul region. auto packs for a target
// with AVX-512 or AVX2 (FMA, F16C: the runtime's panel microkernels need
// them), not for a baseline x86-64; false packs nothing, nor does a module
// that assigns a weight.
// CHECK: mf.parameter @linear.weight : tensor<64x32xf32> init = normal panels
// CHECK: mf.parameter @bf16.weight : tensor<64x32xbf16> init = normal panels
// A weight gathered from too (a tied embedding) stays as stored, as does
// one multiplied by untransposed and a 1-D one.
// CHECK: mf.parameter @tied.weight : tensor<64x32xf32> init = normal {std
// CHECK: mf.parameter @untransposed.weight : tensor<32x64xf32> init = normal {std
// CHECK: mf.parameter @norm.weight : tensor<32xf32> init = ones{{$}}
// STORED-NOT: panels
// BAD: error: pack-weights is auto, true or false, not 'maybe'
mf.parameter @linear.weight : tensor<64x32xf32> init = normal {std = 2.0e-02 : f64}
mf.parameter @bf16.weight : tensor<64x32xbf16> init = normal {std = 2.0e-02 : f64}
mf.parameter @tied.weight : tensor<64x32xf32> init = normal {std = 2.0e-02 : f64}
mf.parameter @untransposed.weight : tensor<32x64xf32> init = normal {std = 2.0e-02 : f64}
mf.parameter @norm.weight : tensor<32xf32> init = ones

func.func @f(%x: tensor<4x32xf32>, %xb: tensor<4x32xbf16>, %ids: tensor<1x4xi32>)
    -> (tensor<4x64xf32>, tensor<4x64xbf16>, tensor<4x64xf32>, tensor<1x4x32xf32>, tensor<4x64xf32>, tensor<4x32xf32>) {
  %w = mf.param @linear.weight : tensor<64x32xf32>
  %0 = mf.fusion matmul(%x, %w) : (tensor<4x32xf32>, tensor<64x32xf32>) -> tensor<4x64xf32> {
  ^bb0(%a: tensor<4x32xf32>, %b: tensor<64x32xf32>):
    %m = mf.matmul %a, %b transpose_rhs : tensor<4x32xf32>, tensor<64x32xf32> -> tensor<4x64xf32>
    mf.yield %m : tensor<4x64xf32>
  }
  %wb = mf.param @bf16.weight : tensor<64x32xbf16>
  %1 = mf.fusion matmul(%xb, %wb) : (tensor<4x32xbf16>, tensor<64x32xbf16>) -> tensor<4x64xbf16> {
  ^bb0(%a: tensor<4x32xbf16>, %b: tensor<64x32xbf16>):
    %m = mf.matmul %a, %b transpose_rhs : tensor<4x32xbf16>, tensor<64x32xbf16> -> tensor<4x64xbf16>
    mf.yield %m : tensor<4x64xbf16>
  }
  %t = mf.param @tied.weight : tensor<64x32xf32>
  %2 = mf.fusion matmul(%x, %t) : (tensor<4x32xf32>, tensor<64x32xf32>) -> tensor<4x64xf32> {
  ^bb0(%a: tensor<4x32xf32>, %b: tensor<64x32xf32>):
    %m = mf.matmul %a, %b transpose_rhs : tensor<4x32xf32>, tensor<64x32xf32> -> tensor<4x64xf32>
    mf.yield %m : tensor<4x64xf32>
  }
  %e = mf.embedding %t, %ids : tensor<64x32xf32>, tensor<1x4xi32> -> tensor<1x4x32xf32>
  %u = mf.param @untransposed.weight : tensor<32x64xf32>
  %3 = mf.fusion matmul(%x, %u) : (tensor<4x32xf32>, tensor<32x64xf32>) -> tensor<4x64xf32> {
  ^bb0(%a: tensor<4x32xf32>, %b: tensor<32x64xf32>):
    %m = mf.matmul %a, %b : tensor<4x32xf32>, tensor<32x64xf32> -> tensor<4x64xf32>
    mf.yield %m : tensor<4x64xf32>
  }
  %n = mf.param @norm.weight : tensor<32xf32>
  %4 = mf.rms_norm %x, %n eps = 1.0e-06 : tensor<4x32xf32>, tensor<32xf32>
  return %0, %1, %2, %e, %3, %4 : tensor<4x64xf32>, tensor<4x64xbf16>, tensor<4x64xf32>, tensor<1x4x32xf32>, tensor<4x64xf32>, tensor<4x32xf32>
}
