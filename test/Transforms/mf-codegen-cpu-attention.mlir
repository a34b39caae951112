// RUN: mf-opt %s --pass-pipeline='builtin.module(func.func(mf-fuse-attention),mf-outline-lone-matmuls,mf-codegen-cpu,mfexec-lower-kernels{object-file=%t.o})' | FileCheck %s
// RUN: mf-opt %s --pass-pipeline='builtin.module(func.func(mf-fuse-attention),mf-outline-lone-matmuls,mf-codegen-cpu)' | FileCheck %s --check-prefix=KERNELS
// RUN: llvm-nm %t.o | FileCheck %s --check-prefix=OBJECT

// Every attention region has a kernel.
// CHECK: module attributes {mf.kernels_skipped = {}}

// Decode: little work, one tile for both (batch, KV head) units.
// CHECK-LABEL: func.func @decode
// CHECK: mf.fusion attention{{.*}}kernel = @cpu::@mfk_0
func.func @decode(%q: tensor<1x1x4x16xf32>, %k: tensor<1x1x2x16xf32>, %v: tensor<1x1x2x16xf32>, %pos: tensor<1x1xi32>, %past: tensor<i32>, %ck: tensor<1x32x2x16xf32>, %cv: tensor<1x32x2x16xf32>) -> (tensor<1x1x4x16xf32>, tensor<1x32x2x16xf32>, tensor<1x32x2x16xf32>) {
  %qr = mf.rope %q, %pos theta = 1.0e+04 : tensor<1x1x4x16xf32>, tensor<1x1xi32>
  %kr = mf.rope %k, %pos theta = 1.0e+04 : tensor<1x1x2x16xf32>, tensor<1x1xi32>
  %ck1 = mf.kv_cache_write %ck, %kr, %past : tensor<1x32x2x16xf32>, tensor<1x1x2x16xf32>
  %cv1 = mf.kv_cache_write %cv, %v, %past : tensor<1x32x2x16xf32>, tensor<1x1x2x16xf32>
  %o = mf.attention %qr, %ck1, %cv1 past_length(%past) causal scale = 2.5e-01 : tensor<1x1x4x16xf32>, tensor<1x32x2x16xf32>
  return %o, %ck1, %cv1 : tensor<1x1x4x16xf32>, tensor<1x32x2x16xf32>, tensor<1x32x2x16xf32>
}

// Prefill of two sequences into a cache at a constant position: a tile
// per (batch, KV head).
// CHECK-LABEL: func.func @prefill
// CHECK: mf.fusion attention{{.*}}kernel = @cpu::@mfk_1
func.func @prefill(%q: tensor<2x64x4x32xf32>, %k: tensor<2x64x2x32xf32>, %v: tensor<2x64x2x32xf32>, %pos: tensor<2x64xi32>, %ck: tensor<2x128x2x32xf32>, %cv: tensor<2x128x2x32xf32>) -> (tensor<2x64x4x32xf32>, tensor<2x128x2x32xf32>, tensor<2x128x2x32xf32>) {
  %past = mf.constant dense<0> : tensor<i32>
  %qr = mf.rope %q, %pos theta = 5.0e+05 : tensor<2x64x4x32xf32>, tensor<2x64xi32>
  %kr = mf.rope %k, %pos theta = 5.0e+05 : tensor<2x64x2x32xf32>, tensor<2x64xi32>
  %ck1 = mf.kv_cache_write %ck, %kr, %past : tensor<2x128x2x32xf32>, tensor<2x64x2x32xf32>
  %cv1 = mf.kv_cache_write %cv, %v, %past : tensor<2x128x2x32xf32>, tensor<2x64x2x32xf32>
  %o = mf.attention %qr, %ck1, %cv1 past_length(%past) causal scale = 1.25e-01 : tensor<2x64x4x32xf32>, tensor<2x128x2x32xf32>
  return %o, %ck1, %cv1 : tensor<2x64x4x32xf32>, tensor<2x128x2x32xf32>, tensor<2x128x2x32xf32>
}

// The three gradients of an attention: one kernel, a tile per (batch, KV
// head); a gradient the region does not return would be passed as 0.
// CHECK-LABEL: func.func @gradients
// CHECK: mf.fusion attention_grad{{.*}}kernel = @cpu::@mfk_2
func.func @gradients(%q: tensor<2x64x4x32xf32>, %k: tensor<2x64x2x32xf32>, %v: tensor<2x64x2x32xf32>, %do: tensor<2x64x4x32xf32>) -> (tensor<2x64x4x32xf32>, tensor<2x64x2x32xf32>, tensor<2x64x2x32xf32>) {
  %dv = mf.attention_grad %q, %k, %v, %do causal scale = 1.25e-01 wrt = 2 : tensor<2x64x4x32xf32>, tensor<2x64x2x32xf32> -> tensor<2x64x2x32xf32>
  %dq = mf.attention_grad %q, %k, %v, %do causal scale = 1.25e-01 wrt = 0 : tensor<2x64x4x32xf32>, tensor<2x64x2x32xf32> -> tensor<2x64x4x32xf32>
  %dk = mf.attention_grad %q, %k, %v, %do causal scale = 1.25e-01 wrt = 1 : tensor<2x64x4x32xf32>, tensor<2x64x2x32xf32> -> tensor<2x64x2x32xf32>
  return %dq, %dk, %dv : tensor<2x64x4x32xf32>, tensor<2x64x2x32xf32>, tensor<2x64x2x32xf32>
}

// Decode of two sequences on a paged cache (pools of 64 blocks of 8): the
// block table joins the region, and the kernel passes it to the service.
// CHECK-LABEL: func.func @paged
// CHECK: mf.fusion attention{{.*}}kernel = @cpu::@mfk_3
func.func @paged(%q: tensor<2x1x4x16xf32>, %k: tensor<2x1x2x16xf32>, %v: tensor<2x1x2x16xf32>, %pos: tensor<2x1xi32>, %past: tensor<2xi32>, %table: tensor<2x4xi32>, %ck: tensor<64x8x2x16xf32>, %cv: tensor<64x8x2x16xf32>) -> (tensor<2x1x4x16xf32>, tensor<64x8x2x16xf32>, tensor<64x8x2x16xf32>) {
  %qr = mf.rope %q, %pos theta = 1.0e+04 : tensor<2x1x4x16xf32>, tensor<2x1xi32>
  %kr = mf.rope %k, %pos theta = 1.0e+04 : tensor<2x1x2x16xf32>, tensor<2x1xi32>
  %ck1 = mf.kv_cache_write %ck, %kr, %past block_table(%table) : tensor<64x8x2x16xf32>, tensor<2x1x2x16xf32>, tensor<2xi32>, tensor<2x4xi32>
  %cv1 = mf.kv_cache_write %cv, %v, %past block_table(%table) : tensor<64x8x2x16xf32>, tensor<2x1x2x16xf32>, tensor<2xi32>, tensor<2x4xi32>
  %o = mf.attention %qr, %ck1, %cv1 past_length(%past : tensor<2xi32>) block_table(%table) causal scale = 2.5e-01 : tensor<2x1x4x16xf32>, tensor<64x8x2x16xf32>, tensor<2x4xi32>
  return %o, %ck1, %cv1 : tensor<2x1x4x16xf32>, tensor<64x8x2x16xf32>, tensor<64x8x2x16xf32>
}

// The executable declares each kernel's tiles.
// CHECK: mfexec.kernel @mfk_0 tiles(1) :
// CHECK: mfexec.kernel @mfk_1 tiles(4) :
// CHECK: mfexec.kernel @mfk_2 tiles(4) :
// CHECK: mfexec.kernel @mfk_3 tiles(1) :

// The service, declared once, takes its argument struct
// (mfrt_attention_args_v1, runtime/hal/KernelAbi.h); each kernel fills it per
// tile with its units, the buffers (the caches twice: in and out, the same
// memory at run time), the past length's buffer or value, the shape, the
// flags (causal, RoPE on query and keys, a past: 15), the scale and theta
// (doubles: their 8 bytes), and calls it; it returns a status, and the
// kernel returns the first that is not OK (0).
// KERNELS-DAG: func.func private @mfrt_attention_grad(!llvm.ptr) -> i32
// KERNELS-DAG: func.func private @mfrt_attention(!llvm.ptr) -> i32
// KERNELS-LABEL: func.func @mfk_0(
// KERNELS-SAME: -> i32 attributes {mf.tiles = 1 : i64}
// KERNELS-DAG: %[[ARGS:.+]] = memref.alloca() {alignment = 8 : i64} : memref<28xi64>
// KERNELS-DAG: %[[STATUS:.+]] = memref.alloca() : memref<i32>
// KERNELS: scf.for
// KERNELS: %[[ADDRESS:.+]] = memref.extract_aligned_pointer_as_index %[[ARGS]]
// KERNELS: %[[POINTER:.+]] = llvm.inttoptr
// KERNELS: %[[RESULT:.+]] = func.call @mfrt_attention(%[[POINTER]])
// KERNELS: %[[BEFORE:.+]] = memref.load %[[STATUS]]
// KERNELS: %[[OK:.+]] = arith.cmpi eq, %[[BEFORE]]
// KERNELS: %[[FIRST:.+]] = arith.select %[[OK]], %[[RESULT]], %[[BEFORE]]
// KERNELS: memref.store %[[FIRST]], %[[STATUS]]
// KERNELS: %[[RETURNED:.+]] = memref.load %[[STATUS]]
// KERNELS-NEXT: return %[[RETURNED]] : i32
// KERNELS-LABEL: func.func @mfk_1(
// KERNELS-SAME: mf.tiles = 4 : i64
// KERNELS-DAG: %[[FLAGS:.+]] = arith.constant 15 : i64
// KERNELS-DAG: %[[SCALE:.+]] = arith.constant 1.250000e-01 : f64
// KERNELS-DAG: %[[THETA:.+]] = arith.constant 5.000000e+05 : f64
// KERNELS: %[[C20:.+]] = arith.constant 20 : index
// KERNELS-NEXT: memref.store %[[FLAGS]], %{{.+}}[%[[C20]]] : memref<28xi64>
// KERNELS-NEXT: %[[SCALEBITS:.+]] = arith.bitcast %[[SCALE]] : f64 to i64
// KERNELS-NEXT: %[[C21:.+]] = arith.constant 21 : index
// KERNELS-NEXT: memref.store %[[SCALEBITS]], %{{.+}}[%[[C21]]] : memref<28xi64>
// KERNELS-NEXT: %[[THETABITS:.+]] = arith.bitcast %[[THETA]] : f64 to i64
// KERNELS-NEXT: %[[C22:.+]] = arith.constant 22 : index
// KERNELS-NEXT: memref.store %[[THETABITS]], %{{.+}}[%[[C22]]] : memref<28xi64>
// KERNELS: call @mfrt_attention(

// Region results in program order (dv, dq, dk): the gradients by wrt are
// arguments 7, 8 and 6 (after the tile range and four inputs).
// KERNELS-LABEL: func.func @mfk_2(
// KERNELS-SAME: mf.tiles = 4 : i64
// KERNELS-DAG: %[[DV:.+]] = memref.extract_aligned_pointer_as_index %arg6
// KERNELS-DAG: %[[DQ:.+]] = memref.extract_aligned_pointer_as_index %arg7
// KERNELS-DAG: %[[DK:.+]] = memref.extract_aligned_pointer_as_index %arg8
// KERNELS-DAG: %[[DQI:.+]] = arith.index_cast %[[DQ]]
// KERNELS-DAG: %[[DKI:.+]] = arith.index_cast %[[DK]]
// KERNELS-DAG: %[[DVI:.+]] = arith.index_cast %[[DV]]
// KERNELS: %[[C6:.+]] = arith.constant 6 : index
// KERNELS-NEXT: memref.store %[[DQI]], %{{.+}}[%[[C6]]] : memref<18xi64>
// KERNELS-NEXT: %[[C7:.+]] = arith.constant 7 : index
// KERNELS-NEXT: memref.store %[[DKI]], %{{.+}}[%[[C7]]] : memref<18xi64>
// KERNELS-NEXT: %[[C8:.+]] = arith.constant 8 : index
// KERNELS-NEXT: memref.store %[[DVI]], %{{.+}}[%[[C8]]] : memref<18xi64>
// No past length: field 17 is a null pointer.
// KERNELS: %[[C17:.+]] = arith.constant 17 : index
// KERNELS-NEXT: memref.store %c0_i64, %{{.+}}[%[[C17]]] : memref<18xi64>
// KERNELS: call @mfrt_attention_grad(

// The paged kernel: flags 207 (causal, both RoPEs, a past, one per row, a
// paged cache), the keys a row's table maps (4 x 8 = 32) in the shape, then
// the block table's address, the block size and the pool's blocks.
// KERNELS-LABEL: func.func @mfk_3(
// KERNELS-SAME: %arg7: memref<2x4xi32>
// KERNELS-DAG: %[[PFLAGS:.+]] = arith.constant 207 : i64
// KERNELS-DAG: %[[TABLE:.+]] = memref.extract_aligned_pointer_as_index %arg7
// KERNELS-DAG: %[[TABLEI:.+]] = arith.index_cast %[[TABLE]]
// KERNELS: %[[C20P:.+]] = arith.constant 20 : index
// KERNELS-NEXT: memref.store %[[PFLAGS]], %{{.+}}[%[[C20P]]] : memref<28xi64>
// KERNELS: %[[C23:.+]] = arith.constant 23 : index
// KERNELS-NEXT: memref.store %[[TABLEI]], %{{.+}}[%[[C23]]] : memref<28xi64>
// KERNELS-NEXT: %[[C24:.+]] = arith.constant 24 : index
// KERNELS-NEXT: memref.store %c8_i64{{.*}}, %{{.+}}[%[[C24]]] : memref<28xi64>
// KERNELS-NEXT: %[[C25:.+]] = arith.constant 25 : index
// KERNELS-NEXT: memref.store %c64_i64{{.*}}, %{{.+}}[%[[C25]]] : memref<28xi64>
// KERNELS: call @mfrt_attention(

// OBJECT-DAG: T mfk_0
// OBJECT-DAG: T mfk_3
// OBJECT-DAG: T mfk_1
// OBJECT-DAG: T mfk_2
// OBJECT-DAG: B mfrt_attention_grad_ptr
// OBJECT-DAG: B mfrt_attention_ptr
