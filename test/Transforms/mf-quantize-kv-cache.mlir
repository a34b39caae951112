// RUN: mf-opt %s --mf-quantize-kv-cache | FileCheck %s

// An int8 KV cache: each cache the entry takes becomes i8, the rows
// written into it mf.quantize of the new keys or values by a parameter of
// scales per KV head and channel (calibrated from the attention's keys and
// values), which the attention reads the cache with; the entry's type
// follows. An attention without a cache is unchanged.
// CHECK: mf.parameter @model.layers.0.attention.kv_cache.key_scale : tensor<2x16xf16> init = ones calibrated_scales("model.layers.0.attention.attention_core.key")
// CHECK-NEXT: mf.parameter @model.layers.0.attention.kv_cache.value_scale : tensor<2x16xf16> init = ones calibrated_scales("model.layers.0.attention.attention_core.value")
// CHECK-LABEL: func.func @decode
// CHECK-SAME: (%{{.*}}: tensor<1x1x4x16xf16>, %{{.*}}: tensor<1x1x2x16xf16>, %{{.*}}: tensor<1x1x2x16xf16>, %{{.*}}: tensor<i32>, %[[KC:.*]]: tensor<1x32x2x16xi8>, %[[VC:.*]]: tensor<1x32x2x16xi8>) -> (tensor<1x1x4x16xf16>, tensor<1x32x2x16xi8>, tensor<1x32x2x16xi8>)
// CHECK: %[[KS:.*]] = mf.param @model.layers.0.attention.kv_cache.key_scale : tensor<2x16xf16>
// CHECK: %[[KQ:.*]] = mf.quantize %arg1, %[[KS]] : tensor<1x1x2x16xf16>, tensor<2x16xf16> -> tensor<1x1x2x16xi8>
// CHECK: %[[K:.*]] = mf.kv_cache_write %[[KC]], %[[KQ]], %arg3 : tensor<1x32x2x16xi8>, tensor<1x1x2x16xi8>
// CHECK: %[[VS:.*]] = mf.param @model.layers.0.attention.kv_cache.value_scale : tensor<2x16xf16>
// CHECK: %[[VQ:.*]] = mf.quantize %arg2, %[[VS]]
// CHECK: %[[V:.*]] = mf.kv_cache_write %[[VC]], %[[VQ]], %arg3 : tensor<1x32x2x16xi8>, tensor<1x1x2x16xi8>
// CHECK: mf.attention %arg0, %[[K]], %[[V]] past_length(%arg3) causal scale = 2.500000e-01 kv_scales(%[[KS]], %[[VS]] : tensor<2x16xf16>, tensor<2x16xf16>) : tensor<1x1x4x16xf16>, tensor<1x32x2x16xi8>
// CHECK-LABEL: func.func @logits
// CHECK: mf.attention %arg0, %arg1, %arg2 causal scale = 2.500000e-01 : tensor<1x8x4x16xf16>, tensor<1x8x2x16xf16>
func.func @decode(%q: tensor<1x1x4x16xf16>, %k: tensor<1x1x2x16xf16>, %v: tensor<1x1x2x16xf16>, %past: tensor<i32>, %kc: tensor<1x32x2x16xf16>, %vc: tensor<1x32x2x16xf16>) -> (tensor<1x1x4x16xf16>, tensor<1x32x2x16xf16>, tensor<1x32x2x16xf16>) {
  %k1 = mf.kv_cache_write %kc, %k, %past : tensor<1x32x2x16xf16>, tensor<1x1x2x16xf16> loc(#kv)
  %v1 = mf.kv_cache_write %vc, %v, %past : tensor<1x32x2x16xf16>, tensor<1x1x2x16xf16> loc(#kv)
  %o = mf.attention %q, %k1, %v1 past_length(%past) causal scale = 2.5e-01 : tensor<1x1x4x16xf16>, tensor<1x32x2x16xf16> loc(#core)
  return %o, %k1, %v1 : tensor<1x1x4x16xf16>, tensor<1x32x2x16xf16>, tensor<1x32x2x16xf16>
}
func.func @logits(%q: tensor<1x8x4x16xf16>, %k: tensor<1x8x2x16xf16>, %v: tensor<1x8x2x16xf16>) -> tensor<1x8x4x16xf16> {
  %o = mf.attention %q, %k, %v causal scale = 2.5e-01 : tensor<1x8x4x16xf16>, tensor<1x8x2x16xf16> loc(#core)
  return %o : tensor<1x8x4x16xf16>
}
#kv = loc("model.layers.0.attention.kv_cache")
#core = loc("model.layers.0.attention.attention_core")
