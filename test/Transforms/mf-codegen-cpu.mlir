// RUN: mf-opt %s --pass-pipeline='builtin.module(func.func(mf-fuse-elementwise,mf-fuse-matmul-epilogue),mf-outline-lone-matmuls,mf-codegen-cpu,mfexec-lower-kernels{object-file=%t.o})' | FileCheck %s
// RUN: mf-opt %s --pass-pipeline='builtin.module(func.func(mf-fuse-elementwise,mf-fuse-matmul-epilogue),mf-outline-lone-matmuls,mf-codegen-cpu)' | FileCheck %s --check-prefix=KERNELS
// RUN: llvm-nm %t.o | FileCheck %s --check-prefix=OBJECT

// Regions without a kernel rule go back to plain ops, counted by reason.
// CHECK: module attributes {mf.kernels_skipped = {"matmul_epilogue: a matmul that is not [.., M, K] (or a transposed 2-D [K, M]) x 2-D -> the output shape" = 1 : i64}}

// Two identical regions (as in every layer) share one kernel; a region with
// a broadcast input gets its own.
// CHECK-LABEL: func.func @layers
// CHECK: mf.fusion{{.*}}kernel = @cpu::@mfk_0
// CHECK: mf.fusion{{.*}}kernel = @cpu::@mfk_0
// CHECK: mf.fusion{{.*}}kernel = @cpu::@mfk_1
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

// A matmul no region holds gets one of its own: all matmul work is tiled.
// 300 rows x 600 columns: tiles of at most 256 x 256 give 2 x 3, enough to
// share.
// CHECK-LABEL: func.func @projection
// CHECK: mf.fusion matmul(%{{.*}}, %{{.*}}) {kernel = @cpu::@mfk_2}
// CHECK-NEXT: ^bb0
// CHECK-NEXT: mf.matmul
func.func @projection(%x: tensor<300x64xf32>, %w: tensor<600x64xf32>) -> tensor<300x600xf32> {
  %0 = mf.matmul %x, %w transpose_rhs : tensor<300x64xf32>, tensor<600x64xf32> -> tensor<300x600xf32>
  return %0 : tensor<300x600xf32>
}

// The SwiGLU gate: both matmuls and the gate in one kernel; with 88K
// multiply-adds in all it is one tile (sharing it measured slower).
// CHECK-LABEL: func.func @gate
// CHECK: mf.fusion matmul_epilogue{{.*}}kernel = @cpu::@mfk_3
func.func @gate(%x: tensor<1x4x32xf32>, %wg: tensor<344x32xf32>, %wu: tensor<344x32xf32>) -> tensor<1x4x344xf32> {
  %0 = mf.matmul %x, %wg transpose_rhs : tensor<1x4x32xf32>, tensor<344x32xf32> -> tensor<1x4x344xf32>
  %1 = mf.matmul %x, %wu transpose_rhs : tensor<1x4x32xf32>, tensor<344x32xf32> -> tensor<1x4x344xf32>
  %2 = mf.swiglu %0, %1 : tensor<1x4x344xf32>
  return %2 : tensor<1x4x344xf32>
}

// bf16 matmuls get kernels too: the bf16 gemm service widens the tile's
// rows and panel to f32, the product is rounded to bf16 as PyNative stores
// it, then the epilogue runs in f32 and rounds again.
// CHECK-LABEL: func.func @bf16
// CHECK: mf.fusion matmul_epilogue{{.*}}kernel = @cpu::@mfk_4
func.func @bf16(%x: tensor<4x32xbf16>, %w: tensor<32x32xbf16>, %r: tensor<4x32xbf16>) -> tensor<4x32xbf16> {
  %0 = mf.matmul %x, %w transpose_rhs : tensor<4x32xbf16>, tensor<32x32xbf16> -> tensor<4x32xbf16>
  %1 = mf.add %0, %r : tensor<4x32xbf16>
  return %1 : tensor<4x32xbf16>
}

// Decode's matrix-vector products split by columns down to 16 (one
// AVX-512 vector): 1 x 768 x 256, 196K multiply-adds, in 8 tiles of 32;
// one with 8K multiply-adds (under a microsecond) stays one tile.
// CHECK-LABEL: func.func @vector
// CHECK: mf.fusion matmul{{.*}}kernel = @cpu::@mfk_5
// CHECK: mf.fusion matmul{{.*}}kernel = @cpu::@mfk_6
func.func @vector(%x: tensor<1x1x768xf32>, %w: tensor<256x768xf32>, %y: tensor<1x1x64xf32>, %v: tensor<128x64xf32>) -> (tensor<1x1x256xf32>, tensor<1x1x128xf32>) {
  %0 = mf.matmul %x, %w transpose_rhs : tensor<1x1x768xf32>, tensor<256x768xf32> -> tensor<1x1x256xf32>
  %1 = mf.matmul %y, %v transpose_rhs : tensor<1x1x64xf32>, tensor<128x64xf32> -> tensor<1x1x128xf32>
  return %0, %1 : tensor<1x1x256xf32>, tensor<1x1x128xf32>
}

// A 16-bit decode product: its kernel reads the f16 weights itself.
// CHECK-LABEL: func.func @vector_f16
// CHECK: mf.fusion matmul{{.*}}kernel = @cpu::@mfk_7
func.func @vector_f16(%x: tensor<1x1x64xf16>, %w: tensor<96x64xf16>) -> tensor<1x1x96xf16> {
  %0 = mf.matmul %x, %w transpose_rhs : tensor<1x1x64xf16>, tensor<96x64xf16> -> tensor<1x1x96xf16>
  return %0 : tensor<1x1x96xf16>
}

// A batched matmul (a weight per batch) has no kernel rule: its region is
// inlined back and counted above.
// CHECK-LABEL: func.func @batched
// CHECK-NOT: mf.fusion
// CHECK: mf.matmul
// CHECK-NEXT: mf.add
func.func @batched(%a: tensor<2x4x8xf32>, %b: tensor<2x8x4xf32>, %c: tensor<2x4x4xf32>) -> tensor<2x4x4xf32> {
  %0 = mf.matmul %a, %b : tensor<2x4x8xf32>, tensor<2x8x4xf32> -> tensor<2x4x4xf32>
  %1 = mf.add %0, %c : tensor<2x4x4xf32>
  return %1 : tensor<2x4x4xf32>
}

// The kernels, declared in an executable for this machine's CPU with their
// buffers and tiles, and lowered in its code module: the tile range, then
// bare pointers to the inputs and results; the gemm service is a trampoline
// through a pointer the runtime sets.
// CHECK: mfexec.executable @cpu target(#mfexec.target<triple = "x86_64-{{.*}}", cpu = "{{[a-z0-9-]+}}", features = [{{.*}}"sse2"
// CHECK-NEXT: mfexec.kernel @mfk_0 tiles(1) : (memref<4x16xf32>, memref<4x16xf32>) -> memref<4x16xf32>
// CHECK-NEXT: mfexec.kernel @mfk_1 tiles(1) : (memref<4x16xf32>, memref<16xbf16>) -> memref<4x16xbf16>
// CHECK-NEXT: mfexec.kernel @mfk_2 tiles(6) : (memref<300x64xf32>, memref<600x64xf32>) -> memref<300x600xf32>
// CHECK-NEXT: mfexec.kernel @mfk_3 tiles(1) :
// CHECK-NEXT: mfexec.kernel @mfk_4 tiles(1) :
// CHECK-NEXT: mfexec.kernel @mfk_5 tiles(8) :
// CHECK-NEXT: mfexec.kernel @mfk_6 tiles(1) :
// CHECK-NEXT: mfexec.kernel @mfk_7 tiles(1) :
// CHECK-NEXT: builtin.module {
// CHECK: llvm.mlir.global external @mfrt_gemm_f32_ptr()
// CHECK: llvm.func internal @mfrt_gemm_f32(
// CHECK: llvm.load
// CHECK: llvm.call %{{.*}}(
// GELU's tanh is a polynomial in fmas, not a libm call, so LLVM can
// vectorize the loop around it.
// CHECK: llvm.func internal @mfk_0_tiles(%{{.*}}: i64, %{{.*}}: i64, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr) -> i32
// CHECK-NOT: llvm.call @tanhf
// CHECK: llvm.intr.fma

// Before lowering: one linalg.generic per elementwise kernel; matmul kernels
// loop over tiles, call the gemm service into scratch, then the epilogue.
// KERNELS: func.func @mfk_0(%{{.*}}: i64, %{{.*}}: i64, %{{.*}}: memref<4x16xf32>, %{{.*}}: memref<4x16xf32>, %{{.*}}: memref<4x16xf32>) -> i32 attributes {mf.tiles = 1 : i64}
// KERNELS: linalg.generic
// A lone matmul (no epilogue) writes its result directly: no scratch, only
// the gemm service's argument struct (mfrt_gemm_args_v1: 17 fields), passed
// by its address.
// KERNELS: func.func @mfk_2(
// KERNELS: %[[ARGS:.+]] = memref.alloca() {alignment = 8 : i64} : memref<17xi64>
// KERNELS-NOT: memref.alloca
// KERNELS: memref.store %{{.+}}, %[[ARGS]][%{{.+}}] : memref<17xi64>
// KERNELS: %[[ADDRESS:.+]] = memref.extract_aligned_pointer_as_index %[[ARGS]]
// KERNELS: %[[POINTER:.+]] = llvm.inttoptr
// KERNELS: func.call @mfrt_gemm_f32(%[[POINTER]]) : (!llvm.ptr) -> ()
// KERNELS-NOT: linalg.generic
// KERNELS: func.func @mfk_3(
// KERNELS: memref.alloca() {alignment = 64 : i64} : memref<4x344xf32>
// KERNELS: memref.alloca() {alignment = 64 : i64} : memref<4x344xf32>
// KERNELS: scf.for
// KERNELS: func.call @mfrt_gemm_f32(
// KERNELS: func.call @mfrt_gemm_f32(
// KERNELS: linalg.generic
// KERNELS: func.func @mfk_4({{.*}}memref<4x32xbf16>
// KERNELS: func.call @mfrt_gemm_bf16(
// KERNELS: linalg.generic
// Decode's products are the kernel's own vector code, no service call:
// eight weight rows at a time summed by a shuffle tree, then the rows left
// one at a time.
// KERNELS: func.func @mfk_5(
// KERNELS-NOT: func.call
// KERNELS: vector.load {{.*}} : memref<256x768xf32>, vector<16xf32>
// KERNELS: vector.fma
// KERNELS: vector.shuffle
// KERNELS: vector.store {{.*}} : memref<256xf32>, vector<8xf32>
// KERNELS: vector.reduction <add>, {{.*}} fastmath<reassoc>
// KERNELS: func.func @mfk_6(
// f16 weights are widened in registers; the product is rounded to f16 by
// the epilogue.
// KERNELS: func.func @mfk_7({{.*}}memref<96x64xf16>
// KERNELS-NOT: func.call
// KERNELS: vector.load {{.*}} : memref<96x64xf16>, vector<16xf16>
// KERNELS: arith.extf {{.*}} : vector<16xf16> to vector<16xf32>
// KERNELS: linalg.generic
// OBJECT: T mfk_0
// OBJECT: T mfk_1
// OBJECT: T mfk_2
// OBJECT: T mfk_3
// OBJECT: mfrt_gemm_bf16_ptr
// OBJECT: mfrt_gemm_f32_ptr
