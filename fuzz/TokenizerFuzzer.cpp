//===- TokenizerFuzzer.cpp - fuzz the tokenizer.json reader ---------------===//
//
// The input is a tokenizer.json: what parses encodes a fixed text (ASCII,
// CJK, emoji, runs of spaces, a special-token look-alike) and decodes the
// ids again, so the regexes, BPE and the decoder chain run on what the
// mutated file describes.
//

#include "runtime/text/Tokenizer.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mfrt::StatusOr<std::unique_ptr<mfrt::Tokenizer>> tokenizer =
      mfrt::Tokenizer::fromJson(std::vector<uint8_t>(data, data + size), "fuzz");
  if (!tokenizer) {
    return 0;
  }
  static const char *texts[] = {"Hello, world!  123 \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80\n\n",
                                "<|im_start|>user\nHi<|im_end|>", ""};
  for (const char *text : texts) {
    for (bool special : {false, true}) {
      mfrt::StatusOr<std::vector<int32_t>> ids = (*tokenizer)->encode(text, special);
      if (ids) {
        (void)(*tokenizer)->decodeText(*ids, false);
        (void)(*tokenizer)->decodeText(*ids, true);
      }
    }
  }
  return 0;
}
