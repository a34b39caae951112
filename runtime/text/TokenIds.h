//===- TokenIds.h - token ids from bytes, lists and token files -*- C++ -*-===//

#ifndef MFC_RUNTIME_TEXT_TOKENIDS_H
#define MFC_RUNTIME_TEXT_TOKENIDS_H

#include "runtime/base/Status.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace mfrt {

/// Bytes as token ids, for models whose vocabulary covers 0..255.
StatusOr<std::vector<int32_t>> encodeBytes(const std::string &text,
                                           int64_t vocabSize);
/// Ids back to text; control bytes print as \xNN, ids above 255 as <id>.
std::string decodeBytes(const std::vector<int32_t> &ids);
/// Token ids from a text file (through `encodeText`) or an MFTOKENS file:
/// the 8 bytes "MFTOKENS", then little-endian int32 ids.
using TextEncoder =
    std::function<StatusOr<std::vector<int32_t>>(const std::string &)>;
StatusOr<std::vector<int32_t>> readTokens(const std::string &path,
                                          int64_t vocab,
                                          const TextEncoder &encodeText);

/// "1,2,3" -> {1, 2, 3}, each checked against the vocabulary; `flag` names
/// where they came from in messages.
StatusOr<std::vector<int32_t>>
parseIds(const std::string &text, int64_t vocabSize,
         const std::string &flag = "--input-ids");

} // namespace mfrt

#endif // MFC_RUNTIME_TEXT_TOKENIDS_H
