/*===- KernelAbi.h - how a runtime calls mfc's native kernels -----*- C -*-===//
//
// The kernel ABI, version 2: the contract between a kernel library that
// mfc compiles into model.bin and whatever runs it (mf-run, the C harnesses
// of the codegen tests). Plain C so that either side may be written in any
// language; nothing here depends on the rest of the runtime.
//
// A library exports one function, mfrt_kernel_library_query, which returns
// the table of its kernels for an ABI version it speaks (NULL otherwise).
// Each kernel is
//
//   int32_t kernel(const mfrt_dispatch_state_v1 *state);
//
// It computes tiles [tile_begin, tile_end) of its tile_count (clamped to
// that range) reading and writing only its bindings, and returns a status.
// A kernel is reentrant: the runtime calls it on several threads at once
// with disjoint tile ranges.
//
// Runtime services (the gemm microkernels, attention) are the library's
// imports: for each service `mfrt_X` it names, the library has a global
// pointer `mfrt_X_ptr` that the runtime fills after loading it. A service
// takes one argument, a pointer to its argument struct below (IREE's
// executable imports take theirs so too), valid for the call.
//
//===----------------------------------------------------------------------===*/

#ifndef MFC_RUNTIME_HAL_KERNELABI_H
#define MFC_RUNTIME_HAL_KERNELABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version this header describes. A new field or a changed meaning is a
   new version (mfrt_dispatch_state_v2, ...); a library answers the versions
   it was built for. Version 2: the services take argument structs
   (version 1 passed their fields as arguments). Version 4: the gemm
   arguments end with an int4 weight's scales and group. Version 5: the
   attention arguments end with a paged cache's block table. Version 7:
   the attention arguments end with an int8 cache's scales. */
#define MFRT_KERNEL_ABI_VERSION 7u

/* What a kernel (and a service that can fail) returns. */
enum {
  MFRT_KERNEL_OK = 0,
  /* binding_count, or a binding's length, is not the kernel's: nothing was
     computed. */
  MFRT_KERNEL_BAD_DISPATCH = 1,
  /* A service refused a value it read at run time (a KV-cache position past
     the cache); the service said why to the runtime that provides it. */
  MFRT_KERNEL_SERVICE_FAILED = 2,
};

/* One call of a kernel. Bindings come in the kernel's signature order:
   its inputs, then its results; a result that updates an input in place
   (a KV cache, an optimizer state) is bound twice to the same memory. */
typedef struct mfrt_dispatch_state_v1 {
  int64_t tile_begin; /* the tiles to compute: [tile_begin, tile_end) */
  int64_t tile_end;
  uint32_t binding_count;
  uint32_t reserved; /* 0 */
  void *const *binding_ptrs;
  /* Bytes each binding holds: a kernel refuses one shorter than it reads. */
  const uint64_t *binding_lengths;
} mfrt_dispatch_state_v1;

typedef int32_t (*mfrt_kernel_v1)(const mfrt_dispatch_state_v1 *state);

/* A library's kernels, index for index: name, entry point, how many
   bindings it takes and how many tiles its work is split into. */
typedef struct mfrt_kernel_library_v1 {
  uint32_t abi_version; /* MFRT_KERNEL_ABI_VERSION */
  uint32_t kernel_count;
  const char *const *names;
  const mfrt_kernel_v1 *kernels;
  const uint32_t *binding_counts;
  const int64_t *tile_counts;
} mfrt_kernel_library_v1;

/* Exported by every kernel library: its table for ABI `version`, or NULL
   when it does not speak that version. */
typedef const mfrt_kernel_library_v1 *(*mfrt_kernel_library_query_fn)(
    uint32_t version);
#define MFRT_KERNEL_LIBRARY_QUERY "mfrt_kernel_library_query"

/* The gemm services: C[m x n] (f32, row stride ldc) = rows m0.. of op(A)
   times columns n0.. of op(B), op(A) [M x K], op(B) [K x N]. mfrt_gemm_f32
   (A, B f32), mfrt_gemm_f16 and mfrt_gemm_bf16 (A, B in those, multiplied
   in f32); mfrt_gemm_panels_f32, _f16 and _bf16: B an [N x K] weight
   (trans_b = 1) given as its panels of 32 rows (runtime/kernels/PanelGemm.h);
   mfrt_gemm_i8i8_dot (_f16, _bf16): A (f32, f16, bf16) quantized to int8
   per row (mf.dynamic_quantize), or with static scales (mf.quantize), times an
   int8 weight's dot panels (runtime/kernels/Int8DotGemm.h), both scaled;
   mfrt_gemm_i8i8 (_f16, _bf16) the same with the weight as stored. They cannot
   fail: their arguments are the compiler's constants. */
typedef struct mfrt_gemm_args_v1 {
  const void *a; /* [M x K] row-major, or stored [K x M] when trans_a */
  const void *b; /* [N x K] when trans_b, else [K x N] */
  float *c;
  int64_t ldc;
  int64_t m0, n0; /* the tile's first row and column */
  int64_t m, n;   /* the tile's rows and columns */
  int64_t k;
  int64_t n_total; /* N */
  int64_t trans_b, trans_a;
  int64_t m_total; /* M */
  /* An int4 weight's scales ([K / group, N], in A's type) and group size,
     or an int8 weight's ([N]) for mfrt_gemm_i8i8*; NULL and 0 for every
     other product. */
  const void *scales;
  int64_t group;
  /* mfrt_gemm_i8i8*: A quantized with static scales ([K], A's type) and
     zero points ([K], int8) per column of A (mf.quantize) rather than per
     row; the products are then scaled by the weight's scales alone, which
     are f32. NULL for every other product. */
  const void *a_scales;
  const int8_t *a_zero_points;
} mfrt_gemm_args_v1;
typedef void (*mfrt_gemm_v1)(const mfrt_gemm_args_v1 *args);

/* mfrt_attention: units [unit_begin, unit_end) of (batch, KV head) of an
   attention region: RoPE on the query and new keys, the new keys and
   values written into the caches at the past length, attention over the
   cache. A buffer the region does not have is NULL. The past length is
   read from past_pointer unless it is NULL (then past_value). flags: 1
   causal, 2 RoPE on the query, 4 RoPE on the new keys, 8 has a past; 16
   the buffers are f16, 32 bf16, else f32; 64 past_pointer holds one past
   length per batch row (else one for all); 128 the caches are pools of
   paged KV blocks ([pool_blocks, block_size, kv_heads, dim]) that row b
   reads and writes through block_table[b * (keys / block_size) ...], keys
   being then what a row's table maps; 256 the caches are int8, the new
   keys and values written as round_half_even(x / scale[c]) clamped to
   [-128, 127] and read as q * scale[c] by key_scales and value_scales
   ([kv_heads, dim], of the buffers' float type). Returns MFRT_KERNEL_OK, or
   MFRT_KERNEL_SERVICE_FAILED (writing nothing) for a past length that does
   not fit the cache or a block table entry past the pool. */
typedef struct mfrt_attention_args_v1 {
  int64_t unit_begin, unit_end;
  const void *query, *new_keys, *new_values;
  const void *cache_key_in, *cache_value_in;
  void *cache_key, *cache_value;
  const int32_t *positions;
  const int32_t *past_pointer;
  int64_t past_value;
  void *out;
  int64_t batch, seq, heads, kv_heads, dim, keys, new_rows;
  int64_t flags;
  double scale, theta;
  const int32_t *block_table;
  int64_t block_size, pool_blocks;
  const void *key_scales, *value_scales;
} mfrt_attention_args_v1;
typedef int32_t (*mfrt_attention_v1)(const mfrt_attention_args_v1 *args);

/* mfrt_attention_grad: units [unit_begin, unit_end) of the gradients of
   one attention with respect to its query, keys and values (a gradient
   the region does not compute is NULL); flags: 1 causal, 16 f16, 32 bf16.
   Returns MFRT_KERNEL_OK. */
typedef struct mfrt_attention_grad_args_v1 {
  int64_t unit_begin, unit_end;
  const void *query, *keys, *values, *out_grad;
  void *query_grad, *key_grad, *value_grad;
  int64_t batch, seq, heads, kv_heads, dim, key_rows;
  int64_t flags;
  double scale;
  /* One past length for every row, or NULL (0): query row i saw keys
     0 .. past + i. */
  const int32_t *past_length;
} mfrt_attention_grad_args_v1;
typedef int32_t (*mfrt_attention_grad_v1)(
    const mfrt_attention_grad_args_v1 *args);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MFC_RUNTIME_HAL_KERNELABI_H */
