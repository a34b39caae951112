// RUN: mf-opt %s --pass-pipeline='builtin.module(mf-codegen-cpu,mfexec-lower-kernels{object-file=%t.o})' | FileCheck %s
// RUN: llvm-nm %t.o | FileCheck %s --check-prefix=OBJECT
// RUN: not mf-opt %S/mf-outline-lone-matmuls.mlir --mfexec-lower-kernels=object-file=%t.none.o 2>&1 | FileCheck %s --check-prefix=NONE

// The executable's code, lowered: each kernel an LLVM function of bare
// pointers after its tile range, its declaration unchanged.
// CHECK: mfexec.executable @cpu
// CHECK-NEXT: mfexec.kernel @mfk_0 tiles(1) : (memref<4x16xf32>) -> memref<4x16xf32>
// CHECK: llvm.func @mfk_0(%{{.*}}: i64, %{{.*}}: i64, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr)
// OBJECT: T mfk_0
// NONE: error: there are no kernels to write to '{{.*}}none.o'
func.func @f(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = mf.fusion elementwise(%x) : (tensor<4x16xf32>) -> tensor<4x16xf32> {
  ^bb0(%a: tensor<4x16xf32>):
    %e = mf.exp %a : tensor<4x16xf32>
    mf.yield %e : tensor<4x16xf32>
  }
  return %0 : tensor<4x16xf32>
}
