//===- Hash.h - FNV-1a, for names ------------------------------*- C++ -*-===//

#ifndef MFC_RUNTIME_BASE_HASH_H
#define MFC_RUNTIME_BASE_HASH_H

#include <cstddef>
#include <cstdint>

namespace mfrt {

/// 64-bit FNV-1a: cheap, stable across platforms (seeds the deterministic
/// init from parameter names).
inline uint64_t fnv1a64(const void *data, size_t size) {
  const unsigned char *bytes = static_cast<const unsigned char *>(data);
  uint64_t hash = 0xcbf29ce484222325ull; // the FNV-1a 64 offset basis
  for (size_t i = 0; i < size; ++i) {
    hash = (hash ^ bytes[i]) * 1099511628211ull;
  }
  return hash;
}

} // namespace mfrt

#endif // MFC_RUNTIME_BASE_HASH_H
