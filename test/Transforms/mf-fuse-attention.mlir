// RUN: mf-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(mf-fuse-attention))' | FileCheck %s

// Decode: the RoPEs, both cache writes and the attention in one region;
// the updated caches are its results (read after it, by the return).
// CHECK-LABEL: func.func @decode
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<1x1x4x16xf32>, %[[K:[^:]+]]: tensor<1x1x2x16xf32>, %[[V:[^:]+]]: tensor<1x1x2x16xf32>, %[[POS:[^:]+]]: tensor<1x1xi32>, %[[PAST:[^:]+]]: tensor<i32>, %[[CK:[^:]+]]: tensor<1x32x2x16xf32>, %[[CV:[^:]+]]: tensor<1x32x2x16xf32>)
// CHECK: %[[F:.+]]:3 = mf.fusion attention(%[[Q]], %[[POS]], %[[K]], %[[CK]], %[[PAST]], %[[CV]], %[[V]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT: mf.rope
// CHECK-NEXT: mf.rope
// CHECK-NEXT: mf.kv_cache_write
// CHECK-NEXT: mf.kv_cache_write
// CHECK-NEXT: mf.attention
// CHECK-NEXT: mf.yield
// CHECK: return %[[F]]#2, %[[F]]#0, %[[F]]#1
func.func @decode(%q: tensor<1x1x4x16xf32>, %k: tensor<1x1x2x16xf32>, %v: tensor<1x1x2x16xf32>, %pos: tensor<1x1xi32>, %past: tensor<i32>, %ck: tensor<1x32x2x16xf32>, %cv: tensor<1x32x2x16xf32>) -> (tensor<1x1x4x16xf32>, tensor<1x32x2x16xf32>, tensor<1x32x2x16xf32>) {
  %qr = mf.rope %q, %pos theta = 1.0e+04 : tensor<1x1x4x16xf32>, tensor<1x1xi32>
  %kr = mf.rope %k, %pos theta = 1.0e+04 : tensor<1x1x2x16xf32>, tensor<1x1xi32>
  %ck1 = mf.kv_cache_write %ck, %kr, %past : tensor<1x32x2x16xf32>, tensor<1x1x2x16xf32>
  %cv1 = mf.kv_cache_write %cv, %v, %past : tensor<1x32x2x16xf32>, tensor<1x1x2x16xf32>
  %o = mf.attention %qr, %ck1, %cv1 past_length(%past) causal scale = 2.5e-01 : tensor<1x1x4x16xf32>, tensor<1x32x2x16xf32>
  return %o, %ck1, %cv1 : tensor<1x1x4x16xf32>, tensor<1x32x2x16xf32>, tensor<1x32x2x16xf32>
}

// -----

// Without a cache (training's forward): the RoPEs join the attention.
// CHECK-LABEL: func.func @no_cache
// CHECK: %[[F:.+]] = mf.fusion attention({{.*}})
// CHECK-NEXT: ^bb0
// CHECK-NEXT: mf.rope
// CHECK-NEXT: mf.rope
// CHECK-NEXT: mf.attention
// CHECK-NEXT: mf.yield
func.func @no_cache(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x16xf32>, %v: tensor<2x8x2x16xf32>, %pos: tensor<2x8xi32>) -> tensor<2x8x4x16xf32> {
  %qr = mf.rope %q, %pos theta = 1.0e+04 : tensor<2x8x4x16xf32>, tensor<2x8xi32>
  %kr = mf.rope %k, %pos theta = 1.0e+04 : tensor<2x8x2x16xf32>, tensor<2x8xi32>
  %o = mf.attention %qr, %kr, %v causal scale = 2.5e-01 : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>
  return %o : tensor<2x8x4x16xf32>
}

// -----

// A rotated key the backward pass also reads stays out (it is stored);
// the query's RoPE still joins.
// CHECK-LABEL: func.func @key_read_elsewhere
// CHECK: %[[KR:.+]] = mf.rope %{{.+}}, %{{.+}} theta
// CHECK: mf.fusion attention({{.*}}%[[KR]]{{.*}})
// CHECK-NEXT: ^bb0
// CHECK-NEXT: mf.rope
// CHECK-NEXT: mf.attention
func.func @key_read_elsewhere(%q: tensor<1x8x2x16xf32>, %k: tensor<1x8x2x16xf32>, %v: tensor<1x8x2x16xf32>, %pos: tensor<1x8xi32>) -> (tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32>) {
  %qr = mf.rope %q, %pos theta = 1.0e+04 : tensor<1x8x2x16xf32>, tensor<1x8xi32>
  %kr = mf.rope %k, %pos theta = 1.0e+04 : tensor<1x8x2x16xf32>, tensor<1x8xi32>
  %o = mf.attention %qr, %kr, %v causal scale = 2.5e-01 : tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32>
  return %o, %kr : tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32>
}

// -----

// A lone attention moves no fewer bytes as a region: it stays an op.
// CHECK-LABEL: func.func @lone
// CHECK-NOT: mf.fusion
// CHECK: mf.attention
func.func @lone(%q: tensor<1x8x2x16xf32>, %k: tensor<1x8x2x16xf32>, %v: tensor<1x8x2x16xf32>) -> tensor<1x8x2x16xf32> {
  %o = mf.attention %q, %k, %v causal scale = 2.5e-01 : tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32>
  return %o : tensor<1x8x2x16xf32>
}

// -----

// RoPEs by different positions: neither joins (the kernel turns both by
// one table of angles); the cache writes still do.
// CHECK-LABEL: func.func @different_positions
// CHECK: mf.rope
// CHECK: mf.rope
// CHECK: mf.fusion attention({{.*}})
// CHECK-NEXT: ^bb0
// CHECK-NEXT: mf.kv_cache_write
// CHECK-NEXT: mf.kv_cache_write
// CHECK-NEXT: mf.attention
func.func @different_positions(%q: tensor<1x1x2x16xf32>, %k: tensor<1x1x2x16xf32>, %v: tensor<1x1x2x16xf32>, %p1: tensor<1x1xi32>, %p2: tensor<1x1xi32>, %past: tensor<i32>, %ck: tensor<1x32x2x16xf32>, %cv: tensor<1x32x2x16xf32>) -> (tensor<1x1x2x16xf32>, tensor<1x32x2x16xf32>, tensor<1x32x2x16xf32>) {
  %qr = mf.rope %q, %p1 theta = 1.0e+04 : tensor<1x1x2x16xf32>, tensor<1x1xi32>
  %kr = mf.rope %k, %p2 theta = 1.0e+04 : tensor<1x1x2x16xf32>, tensor<1x1xi32>
  %ck1 = mf.kv_cache_write %ck, %kr, %past : tensor<1x32x2x16xf32>, tensor<1x1x2x16xf32>
  %cv1 = mf.kv_cache_write %cv, %v, %past : tensor<1x32x2x16xf32>, tensor<1x1x2x16xf32>
  %o = mf.attention %qr, %ck1, %cv1 past_length(%past) causal scale = 2.5e-01 : tensor<1x1x2x16xf32>, tensor<1x32x2x16xf32>
  return %o, %ck1, %cv1 : tensor<1x1x2x16xf32>, tensor<1x32x2x16xf32>, tensor<1x32x2x16xf32>
}

// -----

// A cache read between its write and the attention keeps the writes out.
// CHECK-LABEL: func.func @cache_read_between
// CHECK: mf.kv_cache_write
// CHECK: mf.kv_cache_write
// CHECK: mf.reduce_sum
// CHECK: mf.fusion attention({{.*}})
// CHECK-NEXT: ^bb0
// CHECK-NEXT: mf.rope
// CHECK-NEXT: mf.attention
func.func @cache_read_between(%q: tensor<1x1x2x16xf32>, %v: tensor<1x1x2x16xf32>, %pos: tensor<1x1xi32>, %past: tensor<i32>, %ck: tensor<1x32x2x16xf32>, %cv: tensor<1x32x2x16xf32>) -> (tensor<1x1x2x16xf32>, tensor<1x32x2x16xf32>, tensor<1x32x2x16xf32>, tensor<1x32x2x1xf32>) {
  %qr = mf.rope %q, %pos theta = 1.0e+04 : tensor<1x1x2x16xf32>, tensor<1x1xi32>
  %ck1 = mf.kv_cache_write %ck, %v, %past : tensor<1x32x2x16xf32>, tensor<1x1x2x16xf32>
  %cv1 = mf.kv_cache_write %cv, %v, %past : tensor<1x32x2x16xf32>, tensor<1x1x2x16xf32>
  %s = mf.reduce_sum %ck1 dim = 3 : tensor<1x32x2x16xf32> -> tensor<1x32x2x1xf32>
  %o = mf.attention %qr, %ck1, %cv1 past_length(%past) causal scale = 2.5e-01 : tensor<1x1x2x16xf32>, tensor<1x32x2x16xf32>
  return %o, %ck1, %cv1, %s : tensor<1x1x2x16xf32>, tensor<1x32x2x16xf32>, tensor<1x32x2x16xf32>, tensor<1x32x2x1xf32>
}

// CHECK-LABEL: func.func @f16
// CHECK: mf.fusion attention({{.*}})
func.func @f16(%q: tensor<1x8x2x16xf16>, %k: tensor<1x8x2x16xf16>, %v: tensor<1x8x2x16xf16>, %pos: tensor<1x8xi32>) -> tensor<1x8x2x16xf16> {
  %qr = mf.rope %q, %pos theta = 1.0e+04 : tensor<1x8x2x16xf16>, tensor<1x8xi32>
  %o = mf.attention %qr, %k, %v causal scale = 2.5e-01 : tensor<1x8x2x16xf16>, tensor<1x8x2x16xf16>
  return %o : tensor<1x8x2x16xf16>
}

// CHECK-LABEL: func.func @mixed_types
// CHECK-NOT: mf.fusion
func.func @mixed_types(%q: tensor<1x8x2x16xf32>, %k: tensor<1x8x2x16xf16>, %v: tensor<1x8x2x16xf16>, %pos: tensor<1x8xi32>) -> tensor<1x8x2x16xf32> {
  %qr = mf.rope %q, %pos theta = 1.0e+04 : tensor<1x8x2x16xf32>, tensor<1x8xi32>
  %o = mf.attention %qr, %k, %v causal scale = 2.5e-01 : tensor<1x8x2x16xf32>, tensor<1x8x2x16xf16>
  return %o : tensor<1x8x2x16xf32>
}

// -----

// The three gradients of one attention become one region (the softmax is
// recomputed once); a gradient of another attention stays out.
// CHECK-LABEL: func.func @gradients
// CHECK: %[[G:.+]]:3 = mf.fusion attention_grad({{.*}})
// CHECK-NEXT: ^bb0
// CHECK-NEXT: mf.attention_grad {{.*}} wrt = 0
// CHECK-NEXT: mf.attention_grad {{.*}} wrt = 1
// CHECK-NEXT: mf.attention_grad {{.*}} wrt = 2
// CHECK-NEXT: mf.yield
// CHECK: mf.attention_grad {{.*}} scale = 5.000000e-01 wrt = 0
// CHECK-NOT: mf.fusion
func.func @gradients(%q: tensor<1x8x4x16xf32>, %k: tensor<1x8x2x16xf32>, %v: tensor<1x8x2x16xf32>, %do: tensor<1x8x4x16xf32>) -> (tensor<1x8x4x16xf32>, tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32>, tensor<1x8x4x16xf32>) {
  %dq = mf.attention_grad %q, %k, %v, %do causal scale = 2.5e-01 wrt = 0 : tensor<1x8x4x16xf32>, tensor<1x8x2x16xf32> -> tensor<1x8x4x16xf32>
  %dk = mf.attention_grad %q, %k, %v, %do causal scale = 2.5e-01 wrt = 1 : tensor<1x8x4x16xf32>, tensor<1x8x2x16xf32> -> tensor<1x8x2x16xf32>
  %dv = mf.attention_grad %q, %k, %v, %do causal scale = 2.5e-01 wrt = 2 : tensor<1x8x4x16xf32>, tensor<1x8x2x16xf32> -> tensor<1x8x2x16xf32>
  %other = mf.attention_grad %q, %k, %v, %do causal scale = 5.0e-01 wrt = 0 : tensor<1x8x4x16xf32>, tensor<1x8x2x16xf32> -> tensor<1x8x4x16xf32>
  return %dq, %dk, %dv, %other : tensor<1x8x4x16xf32>, tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32>, tensor<1x8x4x16xf32>
}

// -----

// A gradient read before the last of its siblings: no region (it would
// have to sit at the last one).
// CHECK-LABEL: func.func @gradient_read_between
// CHECK-NOT: mf.fusion
func.func @gradient_read_between(%q: tensor<1x8x2x16xf32>, %k: tensor<1x8x2x16xf32>, %v: tensor<1x8x2x16xf32>, %do: tensor<1x8x2x16xf32>) -> (tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32>) {
  %dq = mf.attention_grad %q, %k, %v, %do causal scale = 2.5e-01 wrt = 0 : tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32> -> tensor<1x8x2x16xf32>
  %x = mf.exp %dq : tensor<1x8x2x16xf32>
  %dk = mf.attention_grad %q, %k, %v, %x causal scale = 2.5e-01 wrt = 1 : tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32> -> tensor<1x8x2x16xf32>
  %dv = mf.attention_grad %q, %k, %v, %do causal scale = 2.5e-01 wrt = 2 : tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32> -> tensor<1x8x2x16xf32>
  return %dk, %dv : tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32>
}

// -----

// 16-bit gradients group too (the service converts the rows it reads).
// CHECK-LABEL: func.func @bf16_gradients
// CHECK: mf.fusion attention_grad({{.*}})
func.func @bf16_gradients(%q: tensor<1x8x2x16xbf16>, %k: tensor<1x8x2x16xbf16>, %v: tensor<1x8x2x16xbf16>, %do: tensor<1x8x2x16xbf16>) -> (tensor<1x8x2x16xbf16>, tensor<1x8x2x16xbf16>) {
  %dq = mf.attention_grad %q, %k, %v, %do causal scale = 2.5e-01 wrt = 0 : tensor<1x8x2x16xbf16>, tensor<1x8x2x16xbf16> -> tensor<1x8x2x16xbf16>
  %dk = mf.attention_grad %q, %k, %v, %do causal scale = 2.5e-01 wrt = 1 : tensor<1x8x2x16xbf16>, tensor<1x8x2x16xbf16> -> tensor<1x8x2x16xbf16>
  return %dq, %dk : tensor<1x8x2x16xbf16>, tensor<1x8x2x16xbf16>
}

// -----

// Scaled RoPEs (a context extension) stay ops of their own: the attention
// service computes plain frequencies (and a lone attention is left as it is).
// CHECK-LABEL: func.func @scaled_rope
// CHECK: %[[QR:.+]] = mf.rope %{{.+}}, %{{.+}} theta = {{.*}} frequency_scale
// CHECK: %[[KR:.+]] = mf.rope %{{.+}}, %{{.+}} theta = {{.*}} frequency_scale
// CHECK-NOT: mf.fusion
// CHECK: mf.attention %[[QR]], %[[KR]]
func.func @scaled_rope(%q: tensor<1x8x2x4xf32>, %k: tensor<1x8x2x4xf32>, %v: tensor<1x8x2x4xf32>, %pos: tensor<1x8xi32>) -> tensor<1x8x2x4xf32> {
  %qr = mf.rope %q, %pos theta = 1.0e+04 frequency_scale = [1.0, 0.25] : tensor<1x8x2x4xf32>, tensor<1x8xi32>
  %kr = mf.rope %k, %pos theta = 1.0e+04 frequency_scale = [1.0, 0.25] : tensor<1x8x2x4xf32>, tensor<1x8xi32>
  %o = mf.attention %qr, %kr, %v causal scale = 5.0e-01 : tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>
  return %o : tensor<1x8x2x4xf32>
}
