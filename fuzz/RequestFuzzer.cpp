//===- RequestFuzzer.cpp - fuzz mf-serve's request reader -----------------===//
//
// The input is an HTTP body: what parses as JSON is read as a completions
// and as a chat request. Every outcome must be a request or an error that
// names a field, never a crash.
//

#include "tools/mf-serve/OpenAi.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  nlohmann::json body = nlohmann::json::parse(
      std::string(reinterpret_cast<const char *>(data), size), nullptr,
      /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    return 0;
  }
  for (bool chat : {false, true}) {
    mfrt::StatusOr<mfserve::ApiRequest> request =
        mfserve::parseRequest(body, chat, 0);
    if (!request && request.status().message().empty()) {
      __builtin_trap(); // an error must say what is wrong
    }
  }
  return 0;
}
