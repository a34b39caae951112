// RUN: not mf-opt %s --mf-quantize-kv-cache 2>&1 | FileCheck %s

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
