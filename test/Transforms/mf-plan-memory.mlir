// RUN: mf-opt %s --split-input-file --mf-plan-memory=alignment=64 | FileCheck %s

// A chain reuses memory: %0 is dead once %2 is computed, so %2 takes its
// place; the arena is two buffers, which is also the bound. The returned
// result is not planned: the runtime writes it into the caller's tensor.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: attributes {mf.arena_bytes = 2048 : i64, mf.arena_lower_bound = 2048 : i64}
// CHECK: mf.exp %{{.*}} {mf.arena_offsets = array<i64: [[A:[0-9]+]]>}
// CHECK: mf.exp %{{.*}} {mf.arena_offsets = array<i64: [[B:[0-9]+]]>}
// CHECK: mf.exp %{{.*}} {mf.arena_offsets = array<i64: [[A]]>}
// CHECK: mf.exp %{{.*}} : tensor<256xf32>{{$}}
func.func @chain(%x: tensor<256xf32>) -> tensor<256xf32> {
  %0 = mf.exp %x : tensor<256xf32>
  %1 = mf.exp %0 : tensor<256xf32>
  %2 = mf.exp %1 : tensor<256xf32>
  %3 = mf.exp %2 : tensor<256xf32>
  return %3 : tensor<256xf32>
}

// -----

// Parameters live outside the arena; a reshape is a view of its operand's
// buffer, which the entry returns through the view, so it lives to the end.
// CHECK-LABEL: func.func @views
// CHECK-SAME: mf.arena_bytes = 1024 : i64
// CHECK: mf.param @w : tensor<256xf32>{{$}}
// CHECK: %[[E:.+]] = mf.exp %{{.*}} {mf.arena_offsets = array<i64: 0>}
// CHECK: mf.reshape %[[E]] : tensor<256xf32> to tensor<16x16xf32>{{$}}
// CHECK: mf.exp %{{.*}} : tensor<256xf32>{{$}}
mf.parameter @w : tensor<256xf32> init = ones
func.func @views() -> (tensor<16x16xf32>, tensor<256xf32>) {
  %w = mf.param @w : tensor<256xf32>
  %0 = mf.exp %w : tensor<256xf32>
  %1 = mf.reshape %0 : tensor<256xf32> to tensor<16x16xf32>
  %2 = mf.exp %w : tensor<256xf32>
  return %1, %2 : tensor<16x16xf32>, tensor<256xf32>
}

// -----

// Offsets are aligned: three 4-byte buffers alive together take 64 + 64 + 4
// bytes (the bound counts bytes, not alignment).
// CHECK-LABEL: func.func @aligned
// CHECK-SAME: mf.arena_bytes = 132 : i64, mf.arena_lower_bound = 12 : i64
func.func @aligned(%s: tensor<1xf32>) -> tensor<1xf32> {
  %0 = mf.exp %s : tensor<1xf32>
  %1 = mf.exp %s : tensor<1xf32>
  %2 = mf.add %0, %1 : tensor<1xf32>
  %3 = mf.exp %2 : tensor<1xf32>
  return %3 : tensor<1xf32>
}

// -----

// A training update: the kernel computing @w's new value reads the old
// value only elementwise and nothing reads it later, so the value is
// computed in place (no arena bytes). @u's old value is read after its
// update's kernel, and @b's update is not a kernel: both keep arena
// buffers (one after the other) and copies.
// CHECK-LABEL: func.func @updates
// CHECK-SAME: mf.arena_bytes = 1024 : i64
// CHECK: %[[W:.+]] = mf.fusion{{.*}}mf.kernel = "mfk_0"
// CHECK-NOT: mf.arena_offsets
// CHECK: mf.assign @w, %[[W]] {mf.in_place} : tensor<256xf32>
// CHECK: %[[U:.+]] = mf.fusion{{.*}}mf.arena_offsets
// CHECK: mf.assign @u, %[[U]] : tensor<256xf32>
// CHECK: %[[B:.+]] = mf.exp %{{.*}} {mf.arena_offsets
// CHECK: mf.assign @b, %[[B]] : tensor<256xf32>
mf.parameter @w : tensor<256xf32> init = ones
mf.parameter @u : tensor<256xf32> init = ones
mf.parameter @b : tensor<256xf32> init = ones
func.func @updates(%g: tensor<256xf32>) -> tensor<256xf32> {
  %w = mf.param @w : tensor<256xf32>
  %w1 = mf.fusion(%w, %g) {kind = "elementwise", mf.kernel = "mfk_0"} : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32> {
  ^bb0(%a: tensor<256xf32>, %b: tensor<256xf32>):
    %d = mf.sub %a, %b : tensor<256xf32>
    mf.yield %d : tensor<256xf32>
  }
  %0 = mf.assign @w, %w1 : tensor<256xf32>
  %u = mf.param @u : tensor<256xf32>
  %u1 = mf.fusion(%u, %g) {kind = "elementwise", mf.kernel = "mfk_0"} : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32> {
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
// a kernel region reading only it — the runtime computes when the weights
// change and keeps outside the arena (offset -2). Not what reads an input,
// nor what the entry returns (directly or through a view).
// CHECK-LABEL: func.func @derived
// CHECK-SAME: mf.arena_bytes = 512 : i64
// CHECK: mf.cast %{{.*}} {mf.arena_offsets = array<i64: -2>} : tensor<64x64xf32> to tensor<64x64xbf16>
// CHECK: mf.fusion{{.*}}mf.arena_offsets = array<i64: -2>
// CHECK: mf.matmul %{{.*}} {mf.arena_offsets = array<i64: 0>}
// CHECK: mf.exp %{{.*}} {mf.arena_offsets = array<i64: 0>}
// CHECK: mf.exp %{{.*}} : tensor<4xf32>{{$}}
mf.parameter @p : tensor<64x64xf32> init = ones
mf.parameter @q : tensor<4xf32> init = ones
func.func @derived(%x: tensor<4x64xbf16>) -> (tensor<4x64xf32>, tensor<2x2xf32>, tensor<4xf32>) {
  %p = mf.param @p : tensor<64x64xf32>
  %0 = mf.cast %p : tensor<64x64xf32> to tensor<64x64xbf16>
  %1 = mf.fusion(%0) {kind = "elementwise", mf.kernel = "mfk_0"} : (tensor<64x64xbf16>) -> tensor<64x64xbf16> {
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

// -----

// In an entry that assigns a parameter (a training step), nothing is
// derived: what it casts keeps its arena buffer.
// CHECK-LABEL: func.func @cast_while_training
// CHECK: mf.cast %{{.*}} {mf.arena_offsets = array<i64: 0>}
mf.parameter @r : tensor<256xf32> init = ones
func.func @cast_while_training(%g: tensor<256xbf16>) -> tensor<256xbf16> {
  %r = mf.param @r : tensor<256xf32>
  %0 = mf.cast %r : tensor<256xf32> to tensor<256xbf16>
  %1 = mf.mul %0, %g : tensor<256xbf16>
  %2 = mf.cast %1 : tensor<256xbf16> to tensor<256xf32>
  %3 = mf.assign @r, %2 : tensor<256xf32>
  return %1 : tensor<256xbf16>
}
