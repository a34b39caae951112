// RUN: mf-opt %s --pass-pipeline='builtin.module(mf-codegen-cpu,mfexec-lower-kernels{object-file=%t.o})' | FileCheck %s
// RUN: llvm-nm %t.o | FileCheck %s --check-prefix=OBJECT
// RUN: not mf-opt %S/mf-outline-lone-matmuls.mlir --mfexec-lower-kernels=object-file=%t.none.o 2>&1 | FileCheck %s --check-prefix=NONE

// The executable's code, lowered: each kernel's body an internal LLVM
// function of bare pointers after its tile range, its declaration
// unchanged.
// CHECK: mfexec.executable @cpu
// CHECK-NEXT: mfexec.kernel @mfk_0 tiles(1) : (memref<4x16xf32>) -> memref<4x16xf32>
// CHECK: llvm.func internal @mfk_0_tiles(%{{.*}}: i64, %{{.*}}: i64, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr) -> i32
// The ABI entry point (runtime/hal/KernelAbi.h): int32_t mfk_0(const
// mfrt_dispatch_state_v1 *), which checks binding_count (2) and each
// binding's length (4 x 16 floats: 256 bytes), else returns 1
// (MFRT_KERNEL_BAD_DISPATCH), and calls the body with the state's tile
// range and bindings.
// CHECK: llvm.func @mfk_0(%[[STATE:.+]]: !llvm.ptr) -> i32
// CHECK-DAG: %[[BEGIN_AT:.+]] = llvm.getelementptr %[[STATE]][0, 0] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(i64, i64, i32, i32, ptr, ptr)>
// CHECK-DAG: %[[POINTERS_AT:.+]] = llvm.getelementptr %[[STATE]][0, 4]
// CHECK-DAG: %[[COUNT_AT:.+]] = llvm.getelementptr %[[STATE]][0, 2]
// CHECK: %[[COUNT:.+]] = llvm.load %[[COUNT_AT]] : !llvm.ptr -> i32
// CHECK: llvm.icmp "eq" %[[COUNT]]
// CHECK: llvm.call @mfk_0_tiles(
// CHECK: llvm.mlir.constant(1 : i32) : i32
// CHECK: llvm.mlir.constant(256 : i64) : i64
// CHECK: llvm.icmp "uge"
// The library's table: names, entry points, binding and tile counts,
// returned by mfrt_kernel_library_query for version 1 only.
// CHECK: llvm.mlir.global internal constant @mfrt_kernel_name_0("mfk_0\00")
// CHECK: llvm.mlir.addressof @mfk_0
// CHECK: @mfrt_kernel_binding_counts(dense<2> : tensor<1xi32>)
// CHECK: @mfrt_kernel_tile_counts(dense<1> : tensor<1xi64>)
// CHECK: llvm.mlir.global internal constant @mfrt_kernel_library()
// CHECK: llvm.func @mfrt_kernel_library_query(%[[VERSION:.+]]: i32) -> !llvm.ptr
// CHECK: llvm.icmp "eq" %[[VERSION]]
// OBJECT: T mfk_0
// OBJECT: T mfrt_kernel_library_query
// NONE: error: there are no kernels to write to '{{.*}}none.o'
func.func @f(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = mf.fusion elementwise(%x) : (tensor<4x16xf32>) -> tensor<4x16xf32> {
  ^bb0(%a: tensor<4x16xf32>):
    %e = mf.exp %a : tensor<4x16xf32>
    mf.yield %e : tensor<4x16xf32>
  }
  return %0 : tensor<4x16xf32>
}
