/*===- KernelAbi.h - how a runtime calls mfc's native kernels -----*- C -*-===//
//
// The kernel ABI, version 1: the contract between a kernel library that
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
// pointer `mfrt_X_ptr` that the runtime fills after loading it.
//
//===----------------------------------------------------------------------===*/

#ifndef MFC_RUNTIME_KERNELABI_H
#define MFC_RUNTIME_KERNELABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version this header describes. A new field or a changed meaning is a
   new version (mfrt_dispatch_state_v2, ...); a library answers the versions
   it was built for. */
#define MFRT_KERNEL_ABI_VERSION 1u

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

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MFC_RUNTIME_KERNELABI_H */
