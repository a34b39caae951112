// RUN: mf-opt %s --mf-drop-recompute-barriers | FileCheck %s

// Every barrier is replaced by its input, inside fusion regions too; the
// recomputed clone stays.
// CHECK-LABEL: func.func @barriers
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>)
// CHECK-NOT: mf.recompute_barrier
// CHECK: %[[E:.+]] = mf.exp %[[X]] {mf.recomputed}
// CHECK: mf.fusion elementwise(%[[X]])
// CHECK: mf.neg %{{.*}}
// CHECK-NOT: mf.recompute_barrier
func.func @barriers(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %b = mf.recompute_barrier %x : tensor<4xf32>
  %e = mf.exp %b {mf.recomputed} : tensor<4xf32>
  %f = mf.fusion elementwise(%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %c = mf.recompute_barrier %a : tensor<4xf32>
    %n = mf.neg %c : tensor<4xf32>
    mf.yield %n : tensor<4xf32>
  }
  return %e, %f : tensor<4xf32>, tensor<4xf32>
}
