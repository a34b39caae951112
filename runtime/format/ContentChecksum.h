//===- ContentChecksum.h - model.bin's whole-file CRC-32 --------*- C++ -*-===//
//
// A model.bin carries the CRC-32 of all its bytes, computed with its own
// content_crc32 field counted as zero: the writer seals the finished buffer,
// the loader checks it right after the flatbuffer verifier, so a flipped bit
// anywhere (a value id in the op program, a dispatch's kernel, a constant)
// is refused before any of it is trusted. CRC-32 detects corruption, not
// tampering: zlib's, because Python's zlib.crc32 computes the same (the
// tests that make corrupt files on purpose seal them again).
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_FORMAT_CONTENTCHECKSUM_H
#define MFC_RUNTIME_FORMAT_CONTENTCHECKSUM_H

#include "runtime/format/schemas/mf_executable_generated.h"

#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace mfrt {

/// The four bytes of content_crc32 in a verified buffer, or null when the
/// field is absent.
inline const uint8_t *contentChecksumField(const mfbin::Executable &root) {
  // The generated table derives from flatbuffers::Table privately; it is
  // one at the same address.
  return reinterpret_cast<const flatbuffers::Table *>(&root)->GetAddressOf(
      mfbin::Executable::VT_CONTENT_CRC32);
}

/// The CRC-32 of `size` bytes with the four at `field` counted as zero.
inline uint32_t contentChecksum(const uint8_t *data, size_t size,
                                const uint8_t *field) {
  static const uint8_t zeros[4] = {};
  size_t at = static_cast<size_t>(field - data);
  uLong crc = crc32_z(0, nullptr, 0);
  crc = crc32_z(crc, data, at);
  crc = crc32_z(crc, zeros, sizeof zeros);
  crc = crc32_z(crc, field + 4, size - at - 4);
  return static_cast<uint32_t>(crc);
}

/// Writes the checksum of a finished, verified buffer into its field;
/// false when the buffer has no such field.
inline bool sealContentChecksum(uint8_t *data, size_t size) {
  const uint8_t *field = contentChecksumField(*mfbin::GetExecutable(data));
  if (!field) {
    return false;
  }
  uint32_t crc = contentChecksum(data, size, field);
  uint8_t *writable = data + (field - data);
  for (int i = 0; i < 4; ++i) { // flatbuffers are little-endian
    writable[i] = static_cast<uint8_t>(crc >> (8 * i));
  }
  return true;
}

} // namespace mfrt

#endif // MFC_RUNTIME_FORMAT_CONTENTCHECKSUM_H
