// RUN: mf-opt %s --split-input-file --mf-schedule-updates | FileCheck %s

// Two parameters' updates, after the whole entry as mf-train-step appends
// them: each moves up to its gradient, ahead of the work that does not feed
// it (%y); the step size both read (shared: a unit mark) moves up alone, to
// after the learning rate. @w2's update stays after %dx, which reads @w2.
// The update of @w1 is a fusion region (its gradient's matmul inside). The
// marks are gone after.
module {
  mf.parameter @w1 : tensor<4x4xf32> init = ones
  mf.parameter @w2 : tensor<4x4xf32> init = ones
  // CHECK-LABEL: func.func @two_layers
  // CHECK-NOT: mf.update
  // CHECK: %[[LR:.+]] = mf.mul %arg1, %arg1
  // CHECK: %[[W2:.+]] = mf.param @w2
  // CHECK: %[[G2:.+]] = mf.matmul %arg0, %arg0 transpose_lhs
  // CHECK-NEXT: %[[DX:.+]] = mf.matmul %arg0, %[[W2]]
  // CHECK-NEXT: %[[N1:.+]] = mf.fusion matmul_epilogue(%[[DX]]
  // CHECK: mf.assign @w1, %[[N1]]
  // CHECK-NEXT: mf.broadcast %[[LR]]
  // CHECK-NEXT: mf.mul %[[G2]]
  // CHECK-NEXT: mf.sub %[[W2]]
  // CHECK-NEXT: mf.assign @w2
  // CHECK-NEXT: %[[Y:.+]] = mf.exp %[[DX]]
  // CHECK-NEXT: return %[[Y]]
  // CHECK-NOT: mf.update
  func.func @two_layers(%dy: tensor<4x4xf32>, %lr: tensor<f32>) -> tensor<4x4xf32> {
    %w1 = mf.param @w1 : tensor<4x4xf32>
    %w2 = mf.param @w2 : tensor<4x4xf32>
    %g2 = mf.matmul %dy, %dy transpose_lhs : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
    %dx = mf.matmul %dy, %w2 : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
    %y = mf.exp %dx : tensor<4x4xf32>
    %step = mf.mul %lr, %lr {mf.update} : tensor<f32>
    %b2 = mf.broadcast %step {mf.update = @w2} : tensor<f32> to tensor<4x4xf32>
    %s2 = mf.mul %g2, %b2 {mf.update = @w2} : tensor<4x4xf32>
    %n2 = mf.sub %w2, %s2 {mf.update = @w2} : tensor<4x4xf32>
    %a2 = mf.assign @w2, %n2 {mf.update = @w2} : tensor<4x4xf32>
    %n1 = mf.fusion matmul_epilogue(%dx, %w1, %step) {mf.update = @w1} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32> {
    ^bb0(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>, %s: tensor<f32>):
      %g1 = mf.matmul %x, %x transpose_lhs : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
      %b1 = mf.broadcast %s {mf.update = @w1} : tensor<f32> to tensor<4x4xf32>
      %s1 = mf.mul %g1, %b1 {mf.update = @w1} : tensor<4x4xf32>
      %n = mf.sub %w, %s1 {mf.update = @w1} : tensor<4x4xf32>
      mf.yield %n : tensor<4x4xf32>
    }
    %a1 = mf.assign @w1, %n1 {mf.update = @w1} : tensor<4x4xf32>
    return %y : tensor<4x4xf32>
  }
}

// -----

// With clipping, the scale reads every gradient: the updates stay after it.
module {
  mf.parameter @a : tensor<4xf32> init = ones
  mf.parameter @b : tensor<4xf32> init = ones
  // CHECK-LABEL: func.func @clipped
  // CHECK: %[[SCALE:.+]] = mf.div
  // CHECK: mf.broadcast %[[SCALE]]
  // CHECK: mf.assign @a
  // CHECK: mf.broadcast %[[SCALE]]
  // CHECK: mf.assign @b
  func.func @clipped(%ga: tensor<4xf32>, %gb: tensor<4xf32>) -> tensor<4xf32> {
    %a = mf.param @a : tensor<4xf32>
    %b = mf.param @b : tensor<4xf32>
    %sa = mf.reduce_sum %ga dim = 0 {mf.update} : tensor<4xf32> -> tensor<1xf32>
    %sb = mf.reduce_sum %gb dim = 0 {mf.update} : tensor<4xf32> -> tensor<1xf32>
    %ra = mf.reshape %sa {mf.update} : tensor<1xf32> to tensor<f32>
    %rb = mf.reshape %sb {mf.update} : tensor<1xf32> to tensor<f32>
    %scale = mf.div %ra, %rb {mf.update} : tensor<f32>
    %xa = mf.broadcast %scale {mf.update = @a} : tensor<f32> to tensor<4xf32>
    %ca = mf.mul %ga, %xa {mf.update = @a} : tensor<4xf32>
    %na = mf.sub %a, %ca {mf.update = @a} : tensor<4xf32>
    %aa = mf.assign @a, %na {mf.update = @a} : tensor<4xf32>
    %xb = mf.broadcast %scale {mf.update = @b} : tensor<f32> to tensor<4xf32>
    %cb = mf.mul %gb, %xb {mf.update = @b} : tensor<4xf32>
    %nb = mf.sub %b, %cb {mf.update = @b} : tensor<4xf32>
    %ab = mf.assign @b, %nb {mf.update = @b} : tensor<4xf32>
    return %ga : tensor<4xf32>
  }
}
