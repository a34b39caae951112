// RUN: mf-opt %s --pass-pipeline='builtin.module(func.func(mf-fuse-elementwise),mf-codegen-cpu{kernels-file=%t.kernels.mlir object-file=%t.o})' | FileCheck %s
// RUN: FileCheck %s --check-prefix=LLVM < %t.kernels.mlir
// RUN: llvm-nm %t.o | FileCheck %s --check-prefix=OBJECT

// Two identical regions (as in every layer) share one kernel; a region with
// a broadcast input gets its own.
// CHECK: module attributes {mf.kernel_count = 2 : i64}
// CHECK-LABEL: func.func @layers
// CHECK: mf.fusion{{.*}}mf.kernel = "mfk_0"
// CHECK: mf.fusion{{.*}}mf.kernel = "mfk_0"
// CHECK: mf.fusion{{.*}}mf.kernel = "mfk_1"
func.func @layers(%a: tensor<4x16xf32>, %b: tensor<4x16xf32>, %bias: tensor<16xbf16>) -> tensor<4x16xbf16> {
  %0 = mf.add %a, %b : tensor<4x16xf32>
  %1 = mf.silu %0 : tensor<4x16xf32>
  %2 = mf.softmax %1 dim = 1 : tensor<4x16xf32>
  %3 = mf.add %2, %b : tensor<4x16xf32>
  %4 = mf.silu %3 : tensor<4x16xf32>
  %5 = mf.softmax %4 dim = 1 : tensor<4x16xf32>
  %6 = mf.cast %5 : tensor<4x16xf32> to tensor<4x16xbf16>
  %7 = mf.broadcast %bias : tensor<16xbf16> to tensor<4x16xbf16>
  %8 = mf.add %6, %7 : tensor<4x16xbf16>
  %9 = mf.gelu %8 approximate = tanh : tensor<4x16xbf16>
  return %9 : tensor<4x16xbf16>
}

// The kernels take bare pointers: inputs, then results.
// LLVM: llvm.func @mfk_0(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr)
// LLVM: llvm.func @mfk_1(
// LLVM: llvm.call @tanhf
// OBJECT: T mfk_0
// OBJECT: T mfk_1
