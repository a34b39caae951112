// RUN: mf-opt %s --split-input-file --mf-autodiff | FileCheck %s

// Elementwise and shape rules: the gradient of each op's operands, summed
// where a value has two users (%x feeds both the mul and the add), and of
// each parameter read. The loss is seeded with 1.
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: -> (tensor<f32> {mf.name = "loss"}, tensor<4x8xf32> {mf.name = "grad.w"})
// CHECK: %[[ONE:.+]] = mf.constant dense<1.000000e+00> : tensor<f32>
// CHECK: mf.cross_entropy_grad %{{.*}}, %{{.*}}, %[[ONE]] ignore_index = -100
// CHECK: mf.reshape
// CHECK: %[[DA:.+]] = mf.silu_grad
// CHECK: mf.mul %[[DA]], %{{.*}}
// CHECK: mf.mul %[[DA]], %{{.*}}
// CHECK: mf.add
// CHECK: return %{{.*}}, %{{.*}} : tensor<f32>, tensor<4x8xf32>
module attributes {mf.run_mode = #mf.run_mode<train>} {
  mf.parameter @w : tensor<4x8xf32> init = normal {std = 2.000000e-02 : f64}
  func.func @forward_loss(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
    %w = mf.param @w : tensor<4x8xf32>
    %x = mf.mul %w, %w : tensor<4x8xf32>
    %a = mf.add %x, %w : tensor<4x8xf32>
    %s = mf.silu %a : tensor<4x8xf32>
    %l = mf.reshape %s : tensor<4x8xf32> to tensor<4x8xf32>
    %flat = mf.reshape %labels : tensor<1x4xi32> to tensor<4xi32>
    %loss = mf.cross_entropy %l, %flat ignore_index = -100 : tensor<4x8xf32>, tensor<4xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Model-level rules: a weight used by a matmul gets A^T g over the flattened
// rows; norms and attention get their gradient ops, one per operand; RoPE
// rotates back; the embedding table gets its rows scattered.
// CHECK-LABEL: func.func @forward_backward
// CHECK-DAG: mf.embedding_grad
// CHECK-DAG: mf.rope %{{.*}}, %{{.*}} theta = 1.000000e+04 inverse
// CHECK-DAG: mf.attention_grad {{.*}} causal scale = 2.500000e-01 wrt = 0
// CHECK-DAG: mf.attention_grad {{.*}} causal scale = 2.500000e-01 wrt = 1
// CHECK-DAG: mf.attention_grad {{.*}} causal scale = 2.500000e-01 wrt = 2
// CHECK-DAG: mf.rms_norm_grad {{.*}} wrt = 0
// CHECK-DAG: mf.rms_norm_grad {{.*}} wrt = 1
// CHECK-DAG: mf.matmul %{{.*}}, %{{.*}} transpose_lhs : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<16x16xf32>
module attributes {mf.run_mode = #mf.run_mode<finetune>} {
  mf.parameter @table : tensor<32x16xf32> init = normal {std = 2.000000e-02 : f64}
  mf.parameter @norm : tensor<16xf32> init = ones
  mf.parameter @wq : tensor<16x16xf32> init = normal {std = 2.000000e-02 : f64}
  mf.parameter @head : tensor<32x16xf32> init = normal {std = 2.000000e-02 : f64}
  func.func @forward_loss(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
    %table = mf.param @table : tensor<32x16xf32>
    %h = mf.embedding %table, %ids : tensor<32x16xf32>, tensor<1x4xi32> -> tensor<1x4x16xf32>
    %norm = mf.param @norm : tensor<16xf32>
    %n = mf.rms_norm %h, %norm eps = 1.0e-05 : tensor<1x4x16xf32>, tensor<16xf32>
    %wq = mf.param @wq : tensor<16x16xf32>
    %q = mf.matmul %n, %wq transpose_rhs : tensor<1x4x16xf32>, tensor<16x16xf32> -> tensor<1x4x16xf32>
    %q4 = mf.reshape %q : tensor<1x4x16xf32> to tensor<1x4x1x16xf32>
    %pos = mf.iota dim = 1 : tensor<1x4xi32>
    %qr = mf.rope %q4, %pos theta = 1.0e+04 : tensor<1x4x1x16xf32>, tensor<1x4xi32>
    %n4 = mf.reshape %n : tensor<1x4x16xf32> to tensor<1x4x1x16xf32>
    %o = mf.attention %qr, %n4, %n4 causal scale = 2.5e-01 : tensor<1x4x1x16xf32>, tensor<1x4x1x16xf32>
    %o2 = mf.reshape %o : tensor<1x4x1x16xf32> to tensor<4x16xf32>
    %head = mf.param @head : tensor<32x16xf32>
    %logits = mf.matmul %o2, %head transpose_rhs : tensor<4x16xf32>, tensor<32x16xf32> -> tensor<4x32xf32>
    %flat = mf.reshape %labels : tensor<1x4xi32> to tensor<4xi32>
    %loss = mf.cross_entropy %logits, %flat ignore_index = -100 : tensor<4x32xf32>, tensor<4xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Inference modules are left alone.
// CHECK-LABEL: func.func @forward_loss
// CHECK-NOT: forward_backward
module attributes {mf.run_mode = #mf.run_mode<eval>} {
  func.func @forward_loss(%ids: tensor<1x4xi32>, %labels: tensor<1x4xi32>) -> tensor<f32> {
    %c = mf.constant dense<0.0> : tensor<f32>
    return %c : tensor<f32>
  }
}

