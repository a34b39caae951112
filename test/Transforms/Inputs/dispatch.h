/* Calls the kernels of a library linked into a harness through their ABI
   (runtime/hal/KernelAbi.h): by name through the library's table, with each
   binding's address and length. */
#ifndef MFC_TEST_DISPATCH_H
#define MFC_TEST_DISPATCH_H

#include "runtime/hal/KernelAbi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const mfrt_kernel_library_v1 *mfrt_kernel_library_query(uint32_t version);

struct bound {
  void *pointer;
  uint64_t bytes;
};
/* A binding of `count` elements of what `pointer` points to. */
#define BUF(pointer, count) {(void *)(pointer), (uint64_t)(count) * sizeof *(pointer)}
/* Bindings as dispatch()'s last two arguments. */
#define BUFS(...)                                                            \
  (struct bound[]){__VA_ARGS__},                                             \
      (uint32_t)(sizeof((struct bound[]){__VA_ARGS__}) / sizeof(struct bound))

/* The library's table; exits when it does not speak this ABI version. */
static const mfrt_kernel_library_v1 *library(void) {
  const mfrt_kernel_library_v1 *table =
      mfrt_kernel_library_query(MFRT_KERNEL_ABI_VERSION);
  if (!table || table->abi_version != MFRT_KERNEL_ABI_VERSION) {
    printf("the library does not speak ABI version %u\n",
           MFRT_KERNEL_ABI_VERSION);
    exit(1);
  }
  return table;
}

/* The index of kernel `name` in the table; exits if there is none. */
static uint32_t kernelIndex(const char *name) {
  const mfrt_kernel_library_v1 *table = library();
  for (uint32_t k = 0; k < table->kernel_count; ++k) {
    if (strcmp(table->names[k], name) == 0) {
      return k;
    }
  }
  printf("the library has no kernel '%s'\n", name);
  exit(1);
}

/* Runs tiles [begin, end) of kernel `name`; returns its status. */
static int32_t tryDispatch(const char *name, int64_t begin, int64_t end,
                           const struct bound *bindings, uint32_t count) {
  void *pointers[32];
  uint64_t lengths[32];
  if (count > 32) {
    printf("a harness dispatches at most 32 bindings\n");
    exit(1);
  }
  for (uint32_t i = 0; i < count; ++i) {
    pointers[i] = bindings[i].pointer;
    lengths[i] = bindings[i].bytes;
  }
  mfrt_dispatch_state_v1 state = {begin, end, count, 0, pointers, lengths};
  return library()->kernels[kernelIndex(name)](&state);
}

/* The same, exiting with a message unless the kernel returns OK. */
static void dispatch(const char *name, int64_t begin, int64_t end,
                     const struct bound *bindings, uint32_t count) {
  int32_t status = tryDispatch(name, begin, end, bindings, count);
  if (status != MFRT_KERNEL_OK) {
    printf("%s returned status %d\n", name, status);
    exit(1);
  }
}

#endif /* MFC_TEST_DISPATCH_H */
