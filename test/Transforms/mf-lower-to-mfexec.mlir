// RUN: mf-opt %s --split-input-file --mf-lower-to-mfexec | FileCheck %s
// RUN: not mf-opt %S/Inputs/initializer-name-taken.mlir --mf-lower-to-mfexec 2>&1 | FileCheck %s --check-prefix=TAKEN
// TAKEN: error: the module has a symbol @derive_from_weights already, the name of its initializer entry

// Each entry gets a host program: inputs are its block arguments, eager ops
// become library calls, a reshape a view. Transient values get transient
// buffers; what the entry returns is written straight into the caller's
// buffer (output_buffer), and parameters are their own storage. Every
// binding names its op-level value: arguments 0.., then results in order.
// CHECK-LABEL: mfexec.entry @chain {
// CHECK-NEXT: ^bb0(%[[X:.+]]: memref<256xf32>):
// CHECK-NEXT: %[[A:.+]] = mfexec.transient : memref<256xf32>
// CHECK-NEXT: mfexec.library "mf.exp" op(0) values [0, 1] (read %[[X]] : memref<256xf32>, write %[[A]] : memref<256xf32>)
// CHECK-NEXT: %[[W:.+]] = mfexec.param @w : memref<256xf32>
// CHECK-NEXT: %[[B:.+]] = mfexec.transient : memref<256xf32>
// CHECK-NEXT: mfexec.library "mf.add" op(2) values [1, 2, 3] (read %[[A]] : memref<256xf32>, read %[[W]] : memref<256xf32>, write %[[B]] : memref<256xf32>)
// CHECK-NEXT: %[[V:.+]] = mfexec.view %[[B]] : memref<256xf32> to memref<16x16xf32>
// CHECK-NEXT: %[[O:.+]] = mfexec.output_buffer : memref<256xf32>
// CHECK-NEXT: mfexec.library "mf.exp" op(4) values [3, 5] (read %[[B]] : memref<256xf32>, write %[[O]] : memref<256xf32>)
// CHECK-NEXT: mfexec.return %[[V]], %[[O]] : memref<16x16xf32>, memref<256xf32>
mf.parameter @w : tensor<256xf32> init = ones
func.func @chain(%x: tensor<256xf32>) -> (tensor<16x16xf32>, tensor<256xf32>) {
  %0 = mf.exp %x : tensor<256xf32>
  %w = mf.param @w : tensor<256xf32>
  %1 = mf.add %0, %w : tensor<256xf32>
  %2 = mf.reshape %1 : tensor<256xf32> to tensor<16x16xf32>
  %3 = mf.exp %1 : tensor<256xf32>
  return %2, %3 : tensor<16x16xf32>, tensor<256xf32>
}

// -----

// A training update: the kernel computing @w's new value reads the old
// value only elementwise and nothing reads it later, so it computes it in
// place: the parameter is bound readwrite and tied to the result, and no
// copy stores it. @u's old value is read after its update's kernel, and
// @b's update is not a kernel: both are computed into transient buffers
// and copied in.
// CHECK-LABEL: mfexec.entry @updates
// CHECK: %[[W:.+]] = mfexec.param @w
// CHECK: mfexec.dispatch @cpu::@mfk_0 ops(1, 1) values [1, 0, 2] (readwrite %[[W]] : memref<256xf32>, read %{{.*}} : memref<256xf32>, write %[[W]] : memref<256xf32>)
// CHECK-NOT: mfexec.copy op(2) values [2
// CHECK: %[[U:.+]] = mfexec.param @u
// CHECK: %[[T:.+]] = mfexec.transient
// CHECK: mfexec.dispatch @cpu::@mfk_0 ops(4, 1) values [4, 0, 5] (read %[[U]] : memref<256xf32>, read %{{.*}} : memref<256xf32>, write %[[T]] : memref<256xf32>)
// CHECK: mfexec.copy op(6) values [5, 7] (read %[[T]] : memref<256xf32>, write %[[U]] : memref<256xf32>)
// CHECK: %[[B:.+]] = mfexec.param @b
// CHECK: mfexec.library "mf.exp"
// CHECK: mfexec.copy op(9) values [9, 10] (read %{{.*}} : memref<256xf32>, write %[[B]] : memref<256xf32>)
mfexec.executable @cpu target(#mfexec.target<triple = "x86_64", cpu = "x86-64", features = []>) {
  mfexec.kernel @mfk_0 tiles(1) : (memref<256xf32>, memref<256xf32>) -> memref<256xf32>
  builtin.module {
    func.func @mfk_0(%b: i64, %e: i64, %x: memref<256xf32>, %y: memref<256xf32>, %z: memref<256xf32>) {
      return
    }
  }
}
mf.parameter @w : tensor<256xf32> init = ones
mf.parameter @u : tensor<256xf32> init = ones
mf.parameter @b : tensor<256xf32> init = ones
func.func @updates(%g: tensor<256xf32>) -> tensor<256xf32> {
  %w = mf.param @w : tensor<256xf32>
  %w1 = mf.fusion elementwise(%w, %g) {kernel = @cpu::@mfk_0} : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32> {
  ^bb0(%a: tensor<256xf32>, %b: tensor<256xf32>):
    %d = mf.sub %a, %b : tensor<256xf32>
    mf.yield %d : tensor<256xf32>
  }
  %0 = mf.assign @w, %w1 : tensor<256xf32>
  %u = mf.param @u : tensor<256xf32>
  %u1 = mf.fusion elementwise(%u, %g) {kernel = @cpu::@mfk_0} : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32> {
  ^bb0(%a: tensor<256xf32>, %b: tensor<256xf32>):
    %d = mf.sub %a, %b : tensor<256xf32>
    mf.yield %d : tensor<256xf32>
  }
  %late = mf.exp %u : tensor<256xf32>
  %1 = mf.assign @u, %u1 : tensor<256xf32>
  %b = mf.param @b : tensor<256xf32>
  %b1 = mf.exp %b : tensor<256xf32>
  %2 = mf.assign @b, %b1 : tensor<256xf32>
  return %late : tensor<256xf32>
}

// -----

// What the weights alone determine — a parameter cast to the compute type,
// a kernel region reading only it — is derived: the entry reads it from a
// slot outside the arena (naming the value of its own it holds), and the
// initializer entry computes it when the weights change. Not what reads an
// input, nor what the entry returns (directly or through a view). A second
// entry that derives the same values shares their slots; the initializer
// computes each once.
// CHECK-LABEL: mfexec.entry @derived {
// CHECK-NEXT: ^bb0(%[[X:.+]]: memref<4x64xbf16>):
// CHECK-NEXT: mfexec.derived slot(0) holds(2) : memref<64x64xbf16>
// CHECK-NEXT: %[[N:.+]] = mfexec.derived slot(1) holds(3) : memref<64x64xbf16>
// CHECK-NEXT: mfexec.transient : memref<4x64xbf16>
// CHECK-NEXT: mfexec.library "mf.matmul" op(3) values [0, 3, 4] (read %[[X]] : memref<4x64xbf16>, read %[[N]] : memref<64x64xbf16>
// CHECK-NEXT: mfexec.output_buffer : memref<4x64xf32>
// CHECK: mfexec.transient : memref<4xf32>
// CHECK-NEXT: mfexec.library "mf.exp" op(6)
// CHECK-NEXT: mfexec.view
// CHECK-NEXT: mfexec.output_buffer : memref<4xf32>
// CHECK-NEXT: mfexec.library "mf.exp" op(8)
// CHECK-LABEL: mfexec.entry @derived_again {
// CHECK: mfexec.derived slot(0) holds(2)
// CHECK: mfexec.derived slot(1) holds(3)
// CHECK-LABEL: func.func @derive_from_weights() -> (tensor<64x64xbf16>, tensor<64x64xbf16>)
// CHECK: mf.param @p
// CHECK-NEXT: %[[CAST:.+]] = mf.cast
// CHECK-NEXT: %[[NEG:.+]] = mf.fusion elementwise(%[[CAST]]) {kernel = @cpu::@mfk_0}
// CHECK: return %[[CAST]], %[[NEG]]
// CHECK-LABEL: mfexec.entry @derive_from_weights initializer {
// CHECK-NEXT: %[[P:.+]] = mfexec.param @p : memref<64x64xf32>
// CHECK-NEXT: %[[C:.+]] = mfexec.derived slot(0) : memref<64x64xbf16>
// CHECK-NEXT: mfexec.library "mf.cast" op(1) values [0, 1] (read %[[P]] : memref<64x64xf32>, write %[[C]] : memref<64x64xbf16>)
// CHECK-NEXT: %[[D:.+]] = mfexec.derived slot(1) : memref<64x64xbf16>
// CHECK-NEXT: mfexec.dispatch @cpu::@mfk_0 ops(2, 1) values [1, 2] (read %[[C]] : memref<64x64xbf16>, write %[[D]] : memref<64x64xbf16>)
// CHECK-NEXT: mfexec.return %[[C]], %[[D]] : memref<64x64xbf16>, memref<64x64xbf16>
mfexec.executable @cpu target(#mfexec.target<triple = "x86_64", cpu = "x86-64", features = []>) {
  mfexec.kernel @mfk_0 tiles(1) : (memref<64x64xbf16>) -> memref<64x64xbf16>
  builtin.module {
    func.func @mfk_0(%b: i64, %e: i64, %x: memref<64x64xbf16>, %y: memref<64x64xbf16>) {
      return
    }
  }
}
mf.parameter @p : tensor<64x64xf32> init = ones
mf.parameter @q : tensor<4xf32> init = ones
func.func @derived(%x: tensor<4x64xbf16>) -> (tensor<4x64xf32>, tensor<2x2xf32>, tensor<4xf32>) {
  %p = mf.param @p : tensor<64x64xf32>
  %0 = mf.cast %p : tensor<64x64xf32> to tensor<64x64xbf16>
  %1 = mf.fusion elementwise(%0) {kernel = @cpu::@mfk_0} : (tensor<64x64xbf16>) -> tensor<64x64xbf16> {
  ^bb0(%a: tensor<64x64xbf16>):
    %n = mf.neg %a : tensor<64x64xbf16>
    mf.yield %n : tensor<64x64xbf16>
  }
  %2 = mf.matmul %x, %1 : tensor<4x64xbf16>, tensor<64x64xbf16> -> tensor<4x64xbf16>
  %3 = mf.cast %2 : tensor<4x64xbf16> to tensor<4x64xf32>
  %q = mf.param @q : tensor<4xf32>
  %4 = mf.exp %q : tensor<4xf32>
  %5 = mf.reshape %4 : tensor<4xf32> to tensor<2x2xf32>
  %6 = mf.exp %q : tensor<4xf32>
  return %3, %5, %6 : tensor<4x64xf32>, tensor<2x2xf32>, tensor<4xf32>
}
func.func @derived_again(%x: tensor<1x64xbf16>) -> tensor<1x64xbf16> {
  %p = mf.param @p : tensor<64x64xf32>
  %0 = mf.cast %p : tensor<64x64xf32> to tensor<64x64xbf16>
  %1 = mf.fusion elementwise(%0) {kernel = @cpu::@mfk_0} : (tensor<64x64xbf16>) -> tensor<64x64xbf16> {
  ^bb0(%a: tensor<64x64xbf16>):
    %n = mf.neg %a : tensor<64x64xbf16>
    mf.yield %n : tensor<64x64xbf16>
  }
  %2 = mf.matmul %x, %1 : tensor<1x64xbf16>, tensor<64x64xbf16> -> tensor<1x64xbf16>
  return %2 : tensor<1x64xbf16>
}

// -----

// In an entry that assigns a parameter (a training step), nothing is
// derived: what it casts is transient.
// CHECK-LABEL: mfexec.entry @cast_while_training
// CHECK: mfexec.transient : memref<256xbf16>
// CHECK-NEXT: mfexec.library "mf.cast"
// CHECK-NOT: mfexec.derived
mf.parameter @r : tensor<256xf32> init = ones
func.func @cast_while_training(%g: tensor<256xbf16>) -> tensor<256xbf16> {
  %r = mf.param @r : tensor<256xf32>
  %0 = mf.cast %r : tensor<256xf32> to tensor<256xbf16>
  %1 = mf.mul %0, %g : tensor<256xbf16>
  %2 = mf.cast %1 : tensor<256xbf16> to tensor<256xf32>
  %3 = mf.assign @r, %2 : tensor<256xf32>
  return %1 : tensor<256xbf16>
}

// -----

// A KV-cache write updates its cache in place: eager, the cache is bound
// readwrite and tied to the result; the entry returns the cache as it came.
// CHECK-LABEL: mfexec.entry @cache
// CHECK-NEXT: ^bb0(%[[CACHE:.+]]: memref<1x4x2x8xf32>, %[[NEW:.+]]: memref<1x1x2x8xf32>, %[[POS:.+]]: memref<i32>):
// CHECK-NEXT: mfexec.library "mf.kv_cache_write" op(0) values [0, 1, 2, 3] (readwrite %[[CACHE]] : memref<1x4x2x8xf32>, read %[[NEW]] : memref<1x1x2x8xf32>, read %[[POS]] : memref<i32>, write %[[CACHE]] : memref<1x4x2x8xf32>)
// CHECK-NEXT: mfexec.return %[[CACHE]]
func.func @cache(%cache: tensor<1x4x2x8xf32>, %new: tensor<1x1x2x8xf32>, %pos: tensor<i32>) -> tensor<1x4x2x8xf32> {
  %0 = mf.kv_cache_write %cache, %new, %pos : tensor<1x4x2x8xf32>, tensor<1x1x2x8xf32>
  return %0 : tensor<1x4x2x8xf32>
}

