// RUN: mf-opt %s | FileCheck %s
// RUN: mf-opt %s | mf-opt | FileCheck %s
// RUN: mf-opt %s --mlir-print-op-generic | mf-opt | FileCheck %s

// A host program of every kind of buffer and command: a lone matmul
// kernel reading its weight as panels, an eager op of the runtime's
// library, a KV cache updated in place, a view, and a parameter's new value
// copied in.

// CHECK-LABEL: mfexec.executable @cpu target(#mfexec.target<triple = "x86_64-unknown-linux-gnu", cpu = "x86-64-v3", features = ["avx2", "fma"]>)
// CHECK: mfexec.kernel @mfk_0 tiles(2) panels [1] : (memref<4x8xf32>, memref<8x8xf32>) -> memref<4x8xf32>
// CHECK: mfexec.kernel @mfk_1 tiles(1) : (memref<2x8xf32>, memref<4x8xf32>) -> memref<2x8xf32>
mfexec.executable @cpu target(#mfexec.target<triple = "x86_64-unknown-linux-gnu", cpu = "x86-64-v3", features = ["avx2", "fma"]>) {
  mfexec.kernel @mfk_0 tiles(2) panels [1] : (memref<4x8xf32>, memref<8x8xf32>) -> memref<4x8xf32>
  mfexec.kernel @mfk_1 tiles(1) : (memref<2x8xf32>, memref<4x8xf32>) -> memref<2x8xf32>
  builtin.module {
    func.func @mfk_0(%b: i64, %e: i64, %x: memref<4x8xf32>, %w: memref<64xf32>, %y: memref<4x8xf32>) {
      return
    }
    func.func @mfk_1(%b: i64, %e: i64, %c: memref<2x8xf32>, %x: memref<4x8xf32>, %y: memref<2x8xf32>) {
      return
    }
  }
}

mf.parameter @w : tensor<8x8xf32> init = ones
mf.parameter @s : tensor<4x8xf32> init = zeros
func.func @step(%x: tensor<4x8xf32>, %cache: tensor<2x8xf32>) -> (tensor<32xf32>, tensor<2x8xf32>) {
  %w = mf.param @w : tensor<8x8xf32>
  %y = mf.matmul %x, %w {transpose_rhs} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %e = mf.exp %y : tensor<4x8xf32>
  %v = mf.reshape %e : tensor<4x8xf32> to tensor<32xf32>
  %a = mf.assign @s, %e : tensor<4x8xf32>
  return %v, %cache : tensor<32xf32>, tensor<2x8xf32>
}

// CHECK-LABEL: mfexec.entry @step arena(256) attributes {arena_lower_bound = 256 : i64}
// CHECK: ^bb0(%[[X:.+]]: memref<4x8xf32>, %[[C:.+]]: memref<2x8xf32>):
// CHECK: %[[W:.+]] = mfexec.param @w : memref<8x8xf32>
// CHECK: %[[Y:.+]] = mfexec.arena[0] : memref<4x8xf32>
// CHECK: %[[E:.+]] = mfexec.arena[128] : memref<4x8xf32>
// CHECK: mfexec.dispatch @cpu::@mfk_0 ops(2, 1) values [0, 2, 3] (read %[[X]] : memref<4x8xf32>, read %[[W]] : memref<8x8xf32>, write %[[Y]] : memref<4x8xf32>)
// CHECK: mfexec.library "mf.exp" op(3) values [3, 4] (read %[[Y]] : memref<4x8xf32>, write %[[E]] : memref<4x8xf32>)
// CHECK: mfexec.dispatch @cpu::@mfk_1 ops(4, 1) values [1, 4, 1] (readwrite %[[C]] : memref<2x8xf32>, read %[[E]] : memref<4x8xf32>, write %[[C]] : memref<2x8xf32>)
// CHECK: %[[V:.+]] = mfexec.view %[[E]] : memref<4x8xf32> to memref<32xf32>
// CHECK: %[[S:.+]] = mfexec.param @s : memref<4x8xf32>
// CHECK: mfexec.copy op(6) values [4, 6] (read %[[E]] : memref<4x8xf32>, write %[[S]] : memref<4x8xf32>)
// CHECK: mfexec.return %[[V]], %[[C]] : memref<32xf32>, memref<2x8xf32>
mfexec.entry @step arena(256) attributes {arena_lower_bound = 256 : i64} {
^bb0(%x: memref<4x8xf32>, %cache: memref<2x8xf32>):
  %w = mfexec.param @w : memref<8x8xf32>
  %y = mfexec.arena[0] : memref<4x8xf32>
  %e = mfexec.arena[128] : memref<4x8xf32>
  mfexec.dispatch @cpu::@mfk_0 ops(2, 1) values [0, 2, 3] (read %x : memref<4x8xf32>, read %w : memref<8x8xf32>, write %y : memref<4x8xf32>)
  mfexec.library "mf.exp" op(3) values [3, 4] (read %y : memref<4x8xf32>, write %e : memref<4x8xf32>)
  mfexec.dispatch @cpu::@mfk_1 ops(4, 1) values [1, 4, 1] (readwrite %cache : memref<2x8xf32>, read %e : memref<4x8xf32>, write %cache : memref<2x8xf32>)
  %v = mfexec.view %e : memref<4x8xf32> to memref<32xf32>
  %s = mfexec.param @s : memref<4x8xf32>
  mfexec.copy op(6) values [4, 6] (read %e : memref<4x8xf32>, write %s : memref<4x8xf32>)
  mfexec.return %v, %cache : memref<32xf32>, memref<2x8xf32>
}


// The other storage kinds. A derived slot an entry reads (holding the
// entry's value 2, the cast) is what the initializer computes.
// CHECK-LABEL: mfexec.entry @storage
// CHECK: mfexec.output_buffer : memref<16xi32>
// CHECK: mfexec.derived slot(0) holds(2) : memref<8x8xbf16>
// CHECK: mfexec.constant op(0) : memref<16xi32>
// CHECK-LABEL: mfexec.entry @derive_from_weights initializer arena(0)
// CHECK: mfexec.derived slot(0) : memref<8x8xbf16>
// CHECK-NEXT: mfexec.library "mf.cast" op(1) values [0, 1]
// CHECK-NEXT: mfexec.return %{{.*}} : memref<8x8xbf16>
func.func @storage() -> tensor<16xi32> {
  %c = mf.constant dense<1> : tensor<16xi32>
  %w = mf.param @w : tensor<8x8xf32>
  %d = mf.cast %w : tensor<8x8xf32> to tensor<8x8xbf16>
  return %c : tensor<16xi32>
}
mfexec.entry @storage arena(0) {
  %o = mfexec.output_buffer : memref<16xi32>
  %d = mfexec.derived slot(0) holds(2) : memref<8x8xbf16>
  %c = mfexec.constant op(0) : memref<16xi32>
  mfexec.return %c : memref<16xi32>
}
func.func @derive_from_weights() -> tensor<8x8xbf16> {
  %w = mf.param @w : tensor<8x8xf32>
  %d = mf.cast %w : tensor<8x8xf32> to tensor<8x8xbf16>
  return %d : tensor<8x8xbf16>
}
mfexec.entry @derive_from_weights initializer arena(0) {
  %w = mfexec.param @w : memref<8x8xf32>
  %d = mfexec.derived slot(0) : memref<8x8xbf16>
  mfexec.library "mf.cast" op(1) values [0, 1] (read %w : memref<8x8xf32>, write %d : memref<8x8xbf16>)
  mfexec.return %d : memref<8x8xbf16>
}

// Before memory planning: transient buffers, no arena size.
// CHECK-LABEL: mfexec.entry @unplanned {
// CHECK: mfexec.transient : memref<16xi32>
func.func @unplanned() {
  return
}
mfexec.entry @unplanned {
  %t = mfexec.transient : memref<16xi32>
  mfexec.return
}
