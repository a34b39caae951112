// RUN: not mf-opt %s --split-input-file --mf-quantize-kv-cache 2>&1 | FileCheck %s

// A cache that is not an entry input (written twice) is refused.
// CHECK: error: {{.*}}mf-quantize-kv-cache: expected a cache that is an entry input only KV-cache writes read (with a model path)
func.func @twice(%q: tensor<1x1x4x16xf32>, %k: tensor<1x1x2x16xf32>, %v: tensor<1x1x2x16xf32>, %past: tensor<i32>, %kc: tensor<1x32x2x16xf32>, %vc: tensor<1x32x2x16xf32>) -> tensor<1x1x4x16xf32> {
  %k0 = mf.kv_cache_write %kc, %k, %past : tensor<1x32x2x16xf32>, tensor<1x1x2x16xf32> loc(#kv)
  %k1 = mf.kv_cache_write %k0, %k, %past : tensor<1x32x2x16xf32>, tensor<1x1x2x16xf32> loc(#kv)
  %v1 = mf.kv_cache_write %vc, %v, %past : tensor<1x32x2x16xf32>, tensor<1x1x2x16xf32> loc(#kv)
  %o = mf.attention %q, %k1, %v1 past_length(%past) causal scale = 2.5e-01 : tensor<1x1x4x16xf32>, tensor<1x32x2x16xf32> loc(#core)
  return %o : tensor<1x1x4x16xf32>
}
#kv = loc("model.layers.0.attention.kv_cache")
#core = loc("model.layers.0.attention.attention_core")

// -----

// An attention that reads a cache of keys but its values as they are.
// CHECK: error: {{.*}}mf-quantize-kv-cache: expected an attention (with a model path) that reads a key cache and a value cache
func.func @keys_alone(%q: tensor<1x1x4x16xf32>, %k: tensor<1x1x2x16xf32>, %v: tensor<1x32x2x16xf32>, %past: tensor<i32>, %kc: tensor<1x32x2x16xf32>) -> tensor<1x1x4x16xf32> {
  %k1 = mf.kv_cache_write %kc, %k, %past : tensor<1x32x2x16xf32>, tensor<1x1x2x16xf32> loc(#kv)
  %o = mf.attention %q, %k1, %v past_length(%past) causal scale = 2.5e-01 : tensor<1x1x4x16xf32>, tensor<1x32x2x16xf32> loc(#core)
  return %o : tensor<1x1x4x16xf32>
}
#kv = loc("model.layers.0.attention.kv_cache")
#core = loc("model.layers.0.attention.attention_core")

// -----

// A module that trains (assigns parameters) is refused.
// CHECK: error: mf-quantize-kv-cache: the module updates its parameters (training); an int8 KV cache is for inference
mf.parameter @w : tensor<4xf32> init = zeros
func.func @step(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = mf.assign @w, %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}
