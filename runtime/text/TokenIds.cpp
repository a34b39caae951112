//===- TokenIds.cpp - token ids from bytes, lists and token files ---------===//

#include "runtime/text/TokenIds.h"

#include "runtime/base/FileIO.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <set>

using namespace mfrt;

StatusOr<std::vector<int32_t>> mfrt::encodeBytes(const std::string &text,
                                                 int64_t vocabSize) {
  if (vocabSize < 256) {
    return Status::error(
        StatusCode::DataLoss,
        "without a tokenizer text is read as bytes (ids "
        "0-255), which needs a vocabulary of at least 256; "
        "this model has " +
            std::to_string(vocabSize) +
            ": give token ids (--input-ids, or an MFTOKENS file "
            "for --data)");
  }
  std::vector<int32_t> ids;
  for (unsigned char c : text) {
    ids.push_back(c);
  }
  return ids;
}

std::string mfrt::decodeBytes(const std::vector<int32_t> &ids) {
  auto isByte = [&](size_t i) { return ids[i] >= 0 && ids[i] < 256; };
  // Bytes 0x80 and up pass through only as parts of valid UTF-8 sequences.
  auto utf8Length = [&](size_t i) -> size_t {
    int32_t lead = ids[i];
    size_t length = (lead & 0xE0) == 0xC0   ? 2
                    : (lead & 0xF0) == 0xE0 ? 3
                    : (lead & 0xF8) == 0xF0 ? 4
                                            : 0;
    if (length == 0 || i + length > ids.size()) {
      return 0;
    }
    for (size_t k = 1; k < length; ++k) {
      if (!isByte(i + k) || (ids[i + k] & 0xC0) != 0x80) {
        return 0;
      }
    }
    return length;
  };
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    int32_t id = ids[i];
    if (!isByte(i)) {
      text += "<" + std::to_string(id) + ">";
    } else if ((id >= 0x20 && id < 0x7f) || id == '\n' || id == '\t') {
      text += static_cast<char>(id);
    } else if (size_t length = id >= 0x80 ? utf8Length(i) : 0) {
      for (size_t k = 0; k < length; ++k) {
        text += static_cast<char>(ids[i + k]);
      }
      i += length - 1;
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", id);
      text += escaped;
    }
  }
  return text;
}

StatusOr<std::vector<int32_t>> mfrt::parseIds(const std::string &text,
                                              int64_t vocabSize,
                                              const std::string &flag) {
  std::vector<int32_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    std::string item = text.substr(
        start, end == std::string::npos ? std::string::npos : end - start);
    char *rest = nullptr;
    long value = std::strtol(item.c_str(), &rest, 10);
    if (item.empty() || *rest != '\0') {
      return Status::error(StatusCode::InvalidArgument,
                           flag + ": '" + item +
                               "' is not a token id (expected e.g. 1,2,3)");
    }
    if (value < 0 || value >= vocabSize) {
      return Status::error(StatusCode::InvalidArgument,
                           flag + ": token id " + std::to_string(value) +
                               " is outside the vocabulary [0, " +
                               std::to_string(vocabSize) + ")");
    }
    ids.push_back(static_cast<int32_t>(value));
    if (end == std::string::npos) {
      break;
    }
    start = end + 1;
  }
  return ids;
}

/// Token ids from a text file (bytes) or an MFTOKENS file: the 8 bytes
/// "MFTOKENS", then little-endian int32 ids.
StatusOr<std::vector<int32_t>> mfrt::readTokens(const std::string &path,
                                                int64_t vocab,
                                                const TextEncoder &encodeText) {
  StatusOr<std::vector<uint8_t>> read =
      readRegularFile(path, "data file", kMaxDataFileBytes);
  if (!read) {
    return read.status();
  }
  std::string bytes(read->begin(), read->end());
  read = std::vector<uint8_t>(); // one copy at a time
  if (bytes.rfind("MFTOKENS", 0) != 0) {
    return encodeText(bytes);
  }
  if ((bytes.size() - 8) % 4 != 0) {
    return Status::error(StatusCode::DataLoss,
                         "'" + path +
                             "': an MFTOKENS file holds whole int32 "
                             "ids after its 8-byte magic");
  }
  std::vector<int32_t> ids((bytes.size() - 8) / 4);
  std::memcpy(ids.data(), bytes.data() + 8, ids.size() * 4);
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab) {
      return Status::error(StatusCode::InvalidArgument,
                           "'" + path + "': token id " + std::to_string(id) +
                               " is outside the vocabulary [0, " +
                               std::to_string(vocab) + ")");
    }
  }
  return ids;
}
