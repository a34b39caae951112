// RUN: mf-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(mf-fuse-elementwise))' | FileCheck %s

// RUN: mf-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(mf-fuse-elementwise),mf-print-cost)' -o /dev/null | FileCheck %s --check-prefix=COST

// A chain becomes one region; only its inputs and result cross it: the
// fused chain moves 96 bytes (two inputs, one result) instead of 288.
// COST: entry @chain: 1 ops, 2.4e-08 GFLOP, 9.6e-05 MB moved
// CHECK-LABEL: func.func @chain
// CHECK-SAME: (%[[A:.+]]: tensor<8xf32>, %[[B:.+]]: tensor<8xf32>)
// CHECK: %[[F:.+]] = mf.fusion elementwise(%[[A]], %[[B]]) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32> {
// CHECK-NEXT: ^bb0(%[[X:.+]]: tensor<8xf32>, %[[Y:.+]]: tensor<8xf32>):
// CHECK-NEXT: %[[S:.+]] = mf.add %[[X]], %[[Y]]
// CHECK-NEXT: %[[E:.+]] = mf.exp %[[S]]
// CHECK-NEXT: %[[M:.+]] = mf.mul %[[E]], %[[Y]]
// CHECK-NEXT: mf.yield %[[M]] : tensor<8xf32>
// CHECK: return %[[F]]
func.func @chain(%a: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<8xf32> {
  %0 = mf.add %a, %b : tensor<8xf32>
  %1 = mf.exp %0 : tensor<8xf32>
  %2 = mf.mul %1, %b : tensor<8xf32>
  return %2 : tensor<8xf32>
}

// -----

// A broadcast feeding an elementwise op fuses with it (the bias add).
// CHECK-LABEL: func.func @bias
// CHECK: mf.matmul
// CHECK-NEXT: mf.fusion
// CHECK-NEXT: ^bb0
// CHECK-NEXT: mf.broadcast
// CHECK-NEXT: mf.add
// CHECK-NEXT: mf.silu
func.func @bias(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %0 = mf.matmul %x, %w transpose_rhs : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  %1 = mf.broadcast %b : tensor<16xf32> to tensor<4x16xf32>
  %2 = mf.add %0, %1 : tensor<4x16xf32>
  %3 = mf.silu %2 : tensor<4x16xf32>
  return %3 : tensor<4x16xf32>
}

// -----

// A value also needed outside is a result of the region too.
// CHECK-LABEL: func.func @escaping
// CHECK: %[[F:.+]]:2 = mf.fusion
// CHECK: mf.yield %{{.*}}, %{{.*}} : tensor<8xf32>, tensor<8xf32>
// CHECK: mf.softmax %[[F]]#0
func.func @escaping(%a: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %0 = mf.exp %a : tensor<8xf32>
  %1 = mf.neg %0 : tensor<8xf32>
  %2 = mf.softmax %0 dim = 0 : tensor<8xf32>
  return %2, %1 : tensor<8xf32>, tensor<8xf32>
}

// -----

// %0 is needed by a non-fusible op before %2: putting %2 in %0's group would
// move %0's definition after its use, so %2 starts its own group.
// CHECK-LABEL: func.func @blocked
// CHECK-NOT: mf.fusion
// CHECK: mf.exp
// CHECK: mf.softmax
// CHECK: mf.neg
func.func @blocked(%a: tensor<8xf32>) -> tensor<8xf32> {
  %0 = mf.exp %a : tensor<8xf32>
  %1 = mf.softmax %0 dim = 0 : tensor<8xf32>
  %2 = mf.neg %0 : tensor<8xf32>
  %3 = mf.softmax %2 dim = 0 : tensor<8xf32>
  %4 = mf.add %1, %3 : tensor<8xf32>
  return %4 : tensor<8xf32>
}
