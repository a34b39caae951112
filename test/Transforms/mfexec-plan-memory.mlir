// RUN: mf-opt %s --split-input-file --mfexec-plan-memory=alignment=64 | FileCheck %s

// A chain reuses memory: %a is dead once %c is computed, so %c takes its
// place; the arena is two buffers, which is also the bound.
// CHECK-LABEL: mfexec.entry @chain arena(2048) attributes {arena_lower_bound = 2048 : i64}
// CHECK: %[[A:.+]] = mfexec.arena[[[X:[0-9]+]]] : memref<256xf32>
// CHECK: %[[B:.+]] = mfexec.arena[[[Y:[0-9]+]]] : memref<256xf32>
// CHECK: %[[C:.+]] = mfexec.arena[[[X]]] : memref<256xf32>
// CHECK-NOT: mfexec.transient
func.func @chain(%x: tensor<256xf32>) -> tensor<256xf32> {
  return %x : tensor<256xf32>
}
mfexec.entry @chain {
^bb0(%x: memref<256xf32>):
  %a = mfexec.transient : memref<256xf32>
  mfexec.library "mf.exp" op(0) values [0, 1] (read %x : memref<256xf32>, write %a : memref<256xf32>)
  %b = mfexec.transient : memref<256xf32>
  mfexec.library "mf.exp" op(1) values [1, 2] (read %a : memref<256xf32>, write %b : memref<256xf32>)
  %c = mfexec.transient : memref<256xf32>
  mfexec.library "mf.exp" op(2) values [2, 3] (read %b : memref<256xf32>, write %c : memref<256xf32>)
  %o = mfexec.output_buffer : memref<256xf32>
  mfexec.library "mf.exp" op(3) values [3, 4] (read %c : memref<256xf32>, write %o : memref<256xf32>)
  mfexec.return %o : memref<256xf32>
}

// -----

// A buffer the entry returns through a view lives to the end: the second
// buffer cannot reuse it.
// CHECK-LABEL: mfexec.entry @views arena(2048)
func.func @views(%x: tensor<256xf32>) -> (tensor<16x16xf32>, tensor<256xf32>) {
  %v = mf.reshape %x : tensor<256xf32> to tensor<16x16xf32>
  return %v, %x : tensor<16x16xf32>, tensor<256xf32>
}
mfexec.entry @views {
^bb0(%x: memref<256xf32>):
  %a = mfexec.transient : memref<256xf32>
  mfexec.library "mf.exp" op(0) values [0, 1] (read %x : memref<256xf32>, write %a : memref<256xf32>)
  %v = mfexec.view %a : memref<256xf32> to memref<16x16xf32>
  %b = mfexec.transient : memref<256xf32>
  mfexec.library "mf.exp" op(2) values [0, 3] (read %x : memref<256xf32>, write %b : memref<256xf32>)
  %o = mfexec.output_buffer : memref<256xf32>
  mfexec.library "mf.exp" op(3) values [3, 4] (read %b : memref<256xf32>, write %o : memref<256xf32>)
  mfexec.return %v, %o : memref<16x16xf32>, memref<256xf32>
}

// -----

// Offsets are aligned: three 4-byte buffers alive together take 64 + 64 + 4
// bytes (the bound counts bytes, not alignment).
// CHECK-LABEL: mfexec.entry @aligned arena(132) attributes {arena_lower_bound = 12 : i64}
func.func @aligned(%s: tensor<1xf32>) -> tensor<1xf32> {
  return %s : tensor<1xf32>
}
mfexec.entry @aligned {
^bb0(%s: memref<1xf32>):
  %a = mfexec.transient : memref<1xf32>
  mfexec.library "mf.exp" op(0) values [0, 1] (read %s : memref<1xf32>, write %a : memref<1xf32>)
  %b = mfexec.transient : memref<1xf32>
  mfexec.library "mf.exp" op(1) values [0, 2] (read %s : memref<1xf32>, write %b : memref<1xf32>)
  %c = mfexec.transient : memref<1xf32>
  mfexec.library "mf.add" op(2) values [1, 2, 3] (read %a : memref<1xf32>, read %b : memref<1xf32>, write %c : memref<1xf32>)
  %o = mfexec.output_buffer : memref<1xf32>
  mfexec.library "mf.exp" op(3) values [3, 4] (read %c : memref<1xf32>, write %o : memref<1xf32>)
  mfexec.return %o : memref<1xf32>
}
