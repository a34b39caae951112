/* A kernel library that does not speak this mf-run's kernel ABI
   (runtime/hal/KernelAbi.h): as an mfc before the ABI wrote one (kernels
   exported by name, no table), or, with -DLATER_ABI, one whose table
   answers only a much later version (1000: past every bump of ours). */
#include <stddef.h>
#include <stdint.h>

#ifdef LATER_ABI
const void *mfrt_kernel_library_query(uint32_t version) {
  return version == 1000 ? (const void *)&version : NULL;
}
#endif

void mfk_0(long tileBegin, long tileEnd, float *buffer) {
  (void)tileBegin;
  (void)tileEnd;
  (void)buffer;
}
