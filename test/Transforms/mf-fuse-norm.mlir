// RUN: mf-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(mf-fuse-norm,mf-fuse-elementwise))' | FileCheck %s

// A 16-bit model's norm: the casts to f32 and back join it; the weight's
// cast (a row, not the input) stays outside, for the elementwise pass.
// CHECK-LABEL: func.func @f16_rms
// CHECK: %[[W:.+]] = mf.cast %{{.+}} : tensor<64xf16> to tensor<64xf32>
// CHECK: mf.fusion norm(%{{.+}}, %[[W]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT: mf.cast {{.*}} to tensor<1x8x64xf32>
// CHECK-NEXT: mf.rms_norm
// CHECK-NEXT: mf.cast {{.*}} to tensor<1x8x64xf16>
// CHECK-NEXT: mf.yield
func.func @f16_rms(%x: tensor<1x8x64xf16>, %w: tensor<64xf16>) -> tensor<1x8x64xf16> {
  %w32 = mf.cast %w : tensor<64xf16> to tensor<64xf32>
  %x32 = mf.cast %x : tensor<1x8x64xf16> to tensor<1x8x64xf32>
  %n = mf.rms_norm %x32, %w32 eps = 1.0e-05 : tensor<1x8x64xf32>, tensor<64xf32>
  %y = mf.cast %n : tensor<1x8x64xf32> to tensor<1x8x64xf16>
  return %y : tensor<1x8x64xf16>
}

// -----

// Residual add + norm: the add (read only by the norm) joins; a producer
// read elsewhere stays out and is an input; the chain of sole consumers
// joins until a value has two users.
// CHECK-LABEL: func.func @residual_layer_norm
// CHECK: %[[T:.+]] = mf.tanh
// CHECK: %[[F:.+]] = mf.fusion norm(%[[T]], %{{.+}}, %{{.+}}, %{{.+}})
// CHECK-NEXT: ^bb0
// CHECK-NEXT: mf.add
// CHECK-NEXT: mf.layer_norm
// CHECK-NEXT: mf.gelu
// CHECK-NEXT: mf.yield
// CHECK: mf.exp %[[F]]
// CHECK: mf.neg %[[F]]
func.func @residual_layer_norm(%a: tensor<8x64xf32>, %b: tensor<8x64xf32>, %w: tensor<64xf32>, %c: tensor<64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>) {
  %t = mf.tanh %a : tensor<8x64xf32>
  %h = mf.add %t, %b : tensor<8x64xf32>
  %n = mf.layer_norm %h, %w, %c eps = 1.0e-05 : tensor<8x64xf32>, tensor<64xf32>
  %g = mf.gelu %n approximate = tanh : tensor<8x64xf32>
  %e = mf.exp %g : tensor<8x64xf32>
  %m = mf.neg %g : tensor<8x64xf32>
  return %t, %e, %m : tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>
}

// -----

// A softmax over the last dimension with its scale; one over another
// dimension is no row reduction and stays.
// CHECK-LABEL: func.func @softmax
// CHECK: mf.fusion norm({{.*}})
// CHECK-NEXT: ^bb0
// CHECK-NEXT: mf.constant
// CHECK-NEXT: mf.mul
// CHECK-NEXT: mf.softmax {{.*}} dim = 1
// CHECK: mf.softmax {{.*}} dim = 0
func.func @softmax(%a: tensor<8x64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>) {
  %s = mf.constant dense<0.125> : tensor<8x64xf32>
  %x = mf.mul %a, %s : tensor<8x64xf32>
  %p = mf.softmax %x dim = 1 : tensor<8x64xf32>
  %y = mf.mul %a, %s : tensor<8x64xf32>
  %q = mf.softmax %y dim = 0 : tensor<8x64xf32>
  return %p, %q : tensor<8x64xf32>, tensor<8x64xf32>
}

// -----

// A norm alone moves no fewer bytes as a region, but a kernel dispatch
// costs less host work than an eager op: RMSNorm and LayerNorm alone are
// regions; a softmax alone stays an op.
// CHECK-LABEL: func.func @alone
// CHECK: mf.fusion norm
// CHECK-NEXT: ^bb0
// CHECK-NEXT: mf.rms_norm
// CHECK: mf.fusion norm
// CHECK-NEXT: ^bb0
// CHECK-NEXT: mf.layer_norm
// CHECK-NOT: mf.fusion
// CHECK: mf.softmax
func.func @alone(%x: tensor<8x64xf32>, %w: tensor<64xf32>, %b: tensor<64xf32>)
    -> (tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>) {
  %n = mf.rms_norm %x, %w eps = 1.0e-05 : tensor<8x64xf32>, tensor<64xf32>
  %l = mf.layer_norm %x, %w, %b eps = 1.0e-05 : tensor<8x64xf32>, tensor<64xf32>
  %s = mf.softmax %x dim = 1 : tensor<8x64xf32>
  return %n, %l, %s : tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>
}
