/* bf16 <-> f32 for the C harnesses: a bf16 is an f32's high half. */
#ifndef MFC_TEST_BF16_H
#define MFC_TEST_BF16_H

#include <stdint.h>
#include <string.h>

static float fromBf16(uint16_t bits) {
  uint32_t word = (uint32_t)bits << 16;
  float value;
  memcpy(&value, &word, sizeof value);
  return value;
}

static uint16_t toBf16(float value) { /* truncation: inputs only */
  uint32_t word;
  memcpy(&word, &value, sizeof word);
  return (uint16_t)(word >> 16);
}

#endif
