//===- ChatTemplateFuzzer.cpp - fuzz the chat-template renderer -----------===//
//
// The input is a template: what parses renders with a system and a user
// message and the usual variables.
//

#include "runtime/text/ChatTemplate.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mfrt::StatusOr<mfrt::ChatTemplate> chat =
      mfrt::ChatTemplate::parse(std::string(reinterpret_cast<const char *>(data), size));
  if (chat) {
    (void)chat->render({{"system", "Be brief."}, {"user", "Hello \xe4\xbd\xa0\xe5\xa5\xbd"}},
                       true, {{"bos_token", "<s>"}, {"eos_token", "</s>"}});
  }
  return 0;
}
