//===- mf-tokenize.cpp - a tokenizer.json from the command line -----------===//
//
//   mf-tokenize PATH --encode TEXT [--add-special-tokens]
//   mf-tokenize PATH --decode 1,2,3 [--skip-special-tokens]
//   mf-tokenize PATH --write-mftokens IN.txt OUT.mftokens
//   mf-tokenize --render-template T.jinja --messages M.json [--variables V.json]
//
// PATH is a tokenizer.json or a Hugging Face model folder. --encode prints
// the ids comma-separated on one line; --encode-file reads the text from a
// file, one text per line with --lines (for tests over many strings, lines
// as JSON strings).
//
//===----------------------------------------------------------------------===//

#include "runtime/base/FileIO.h"
#include "runtime/text/ChatTemplate.h"
#include "runtime/text/TokenIds.h"
#include "runtime/text/Tokenizer.h"
#include "runtime/text/TokenizerConfig.h"

#include <getopt.h>
#include <sys/stat.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

using namespace mfrt;

namespace {

int fail(const std::string &message) {
  std::fprintf(stderr, "mf-tokenize: error: %s\n", message.c_str());
  return 1;
}

void usage() {
  std::printf(
      "usage: mf-tokenize PATH (--encode TEXT | --decode IDS | "
      "--write-mftokens IN OUT | --json-lines FILE)\n"
      "  PATH                      tokenizer.json, a folder holding one, or\n"
      "                            a vocab.json with merges.txt beside it\n"
      "  --tokenizer-class C       GPT2Tokenizer or Qwen2Tokenizer, for a\n"
      "                            vocab.json without tokenizer_config.json\n"
      "  --encode TEXT             print TEXT's ids, comma-separated\n"
      "  --add-special-tokens      add the post-processor's tokens (BOS, ...)\n"
      "  --decode 1,2,3            print the ids' text\n"
      "  --skip-special-tokens     leave special tokens out of decoded text\n"
      "  --write-mftokens IN OUT   tokenize the text file IN into the MFTOKENS\n"
      "                            file OUT (for mf-run --data)\n"
      "  --json-lines FILE         each line a JSON string: print its ids\n"
      "                            and, after a tab, the decoded ids as JSON\n"
      "  --vocab-size              print the tokenizer's vocabulary size\n"
      "  --render-template T --messages M.json [--variables V.json]\n"
      "                            render a chat template (no PATH): M a JSON\n"
      "                            list of messages, V an object of variables\n");
}

std::string joinIds(const std::vector<int32_t> &ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    out += (i ? "," : "") + std::to_string(ids[i]);
  }
  return out;
}

} // namespace

int main(int argc, char **argv) {
  enum {
    kEncode = 256, kDecode, kAddSpecial, kSkipSpecial, kWriteTokens,
    kJsonLines, kVocabSize, kRenderTemplate, kMessages, kVariables,
    kTokenizerClass, kHelp
  };
  static const option longOptions[] = {
      {"encode", required_argument, nullptr, kEncode},
      {"decode", required_argument, nullptr, kDecode},
      {"add-special-tokens", no_argument, nullptr, kAddSpecial},
      {"skip-special-tokens", no_argument, nullptr, kSkipSpecial},
      {"write-mftokens", required_argument, nullptr, kWriteTokens},
      {"json-lines", required_argument, nullptr, kJsonLines},
      {"vocab-size", no_argument, nullptr, kVocabSize},
      {"render-template", required_argument, nullptr, kRenderTemplate},
      {"messages", required_argument, nullptr, kMessages},
      {"variables", required_argument, nullptr, kVariables},
      {"tokenizer-class", required_argument, nullptr, kTokenizerClass},
      {"help", no_argument, nullptr, kHelp},
      {nullptr, 0, nullptr, 0}};
  std::optional<std::string> encode, decode, writeInput, jsonLines;
  std::optional<std::string> renderTemplate, messagesFile, variablesFile;
  std::string tokenizerClass;
  bool addSpecial = false, skipSpecial = false, vocabSize = false;
  int code;
  opterr = 0;
  while ((code = getopt_long(argc, argv, "h", longOptions, nullptr)) != -1) {
    switch (code) {
    case kEncode:
      encode = optarg;
      break;
    case kDecode:
      decode = optarg;
      break;
    case kAddSpecial:
      addSpecial = true;
      break;
    case kSkipSpecial:
      skipSpecial = true;
      break;
    case kWriteTokens:
      writeInput = optarg;
      break;
    case kJsonLines:
      jsonLines = optarg;
      break;
    case kVocabSize:
      vocabSize = true;
      break;
    case kRenderTemplate:
      renderTemplate = optarg;
      break;
    case kMessages:
      messagesFile = optarg;
      break;
    case kVariables:
      variablesFile = optarg;
      break;
    case kTokenizerClass:
      tokenizerClass = optarg;
      break;
    case kHelp:
    case 'h':
      usage();
      return 0;
    default:
      return fail(std::string("unknown option '") + argv[optind - 1] +
                  "' (see --help)");
    }
  }
  std::vector<std::string> positional(argv + optind, argv + argc);
  if (renderTemplate) {
    auto read = [](const std::string &path, const char *what) -> StatusOr<std::string> {
      StatusOr<std::vector<uint8_t>> bytes = readRegularFile(path, what, 64ull << 20);
      if (!bytes) {
        return bytes.status();
      }
      return std::string(bytes->begin(), bytes->end());
    };
    if (!messagesFile) {
      return fail("--render-template needs --messages M.json");
    }
    StatusOr<std::string> source = read(*renderTemplate, "chat template");
    StatusOr<std::string> messages = read(*messagesFile, "messages file");
    StatusOr<std::string> variables =
        variablesFile ? read(*variablesFile, "variables file")
                      : StatusOr<std::string>(std::string("{}"));
    for (const auto *status : {&source, &messages, &variables}) {
      if (!*status) {
        return fail(status->status().message());
      }
    }
    // A tokenizer_config.json stands for its chat_template.
    if (renderTemplate->size() >= 5 &&
        renderTemplate->compare(renderTemplate->size() - 5, 5, ".json") == 0) {
      StatusOr<TokenizerConfig> config = TokenizerConfig::read(*renderTemplate);
      if (!config) {
        return fail(config.status().message());
      }
      if (config->chatTemplate.empty()) {
        return fail(*renderTemplate + ": no chat_template");
      }
      *source = config->chatTemplate;
    }
    StatusOr<ChatTemplate> chat = ChatTemplate::parse(*source);
    if (!chat) {
      return fail(chat.status().message());
    }
    StatusOr<std::string> text = chat->renderJson(*messages, *variables);
    if (!text) {
      return fail(text.status().message());
    }
    std::fwrite(text->data(), 1, text->size(), stdout);
    return 0;
  }
  size_t wanted = writeInput ? 2 : 1;
  if (positional.size() != wanted) {
    return fail(writeInput ? "usage: mf-tokenize PATH --write-mftokens IN OUT"
                           : "expected one tokenizer PATH (see --help)");
  }
  int actions = !!encode + !!decode + !!writeInput + !!jsonLines + vocabSize;
  if (actions != 1) {
    return fail("give one of --encode, --decode, --write-mftokens, "
                "--json-lines, --vocab-size");
  }
  StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      Tokenizer::load(positional[0], tokenizerClass);
  if (!tokenizer) {
    return fail(tokenizer.status().message());
  }
  if (vocabSize) {
    std::printf("%lld\n", static_cast<long long>((*tokenizer)->vocabSize()));
    return 0;
  }
  if (encode) {
    StatusOr<std::vector<int32_t>> ids = (*tokenizer)->encode(*encode, addSpecial);
    if (!ids) {
      return fail(ids.status().message());
    }
    std::printf("%s\n", joinIds(*ids).c_str());
    return 0;
  }
  if (decode) {
    StatusOr<std::vector<int32_t>> ids =
        parseIds(*decode, (*tokenizer)->vocabSize(), "--decode");
    if (!ids) {
      return fail(ids.status().message());
    }
    StatusOr<std::string> text = (*tokenizer)->decodeText(*ids, skipSpecial);
    if (!text) {
      return fail(text.status().message());
    }
    std::printf("%s\n", text->c_str());
    return 0;
  }
  if (jsonLines) {
    StatusOr<std::vector<uint8_t>> bytes =
        readRegularFile(*jsonLines, "text file", kMaxDataFileBytes);
    if (!bytes) {
      return fail(bytes.status().message());
    }
    std::string all(bytes->begin(), bytes->end());
    size_t start = 0, line = 0;
    while (start < all.size()) {
      size_t end = all.find('\n', start);
      std::string text = all.substr(start, end == std::string::npos
                                               ? std::string::npos
                                               : end - start);
      start = end == std::string::npos ? all.size() : end + 1;
      ++line;
      nlohmann::json parsed = nlohmann::json::parse(text, nullptr, false);
      if (parsed.is_discarded() || !parsed.is_string()) {
        return fail(*jsonLines + ":" + std::to_string(line) +
                    ": expected a JSON string");
      }
      StatusOr<std::vector<int32_t>> ids =
          (*tokenizer)->encode(parsed.get<std::string>(), addSpecial);
      if (!ids) {
        return fail(*jsonLines + ":" + std::to_string(line) + ": " +
                    ids.status().message());
      }
      StatusOr<std::string> decoded = (*tokenizer)->decodeText(*ids, skipSpecial);
      if (!decoded) {
        return fail(decoded.status().message());
      }
      std::printf("%s\t%s\n", joinIds(*ids).c_str(),
                  // Bytes that are not UTF-8 (a token that splits a
                  // character) print as U+FFFD, as Hugging Face's decode.
                  nlohmann::json(*decoded)
                      .dump(-1, ' ', false,
                            nlohmann::json::error_handler_t::replace)
                      .c_str());
    }
    return 0;
  }
  // --write-mftokens IN OUT
  const std::string &output = positional[1];
  if (Status writable = checkWritableTarget(output, "token file"); !writable) {
    return fail(writable.message());
  }
  struct stat in, out;
  if (stat(writeInput->c_str(), &in) == 0 && stat(output.c_str(), &out) == 0 &&
      in.st_dev == out.st_dev && in.st_ino == out.st_ino) {
    return fail("--write-mftokens: '" + output + "' is the input text file " +
                "itself; writing it would replace the corpus with its tokens " +
                "(give another output path)");
  }
  StatusOr<std::vector<uint8_t>> bytes =
      readRegularFile(*writeInput, "text file", kMaxDataFileBytes);
  if (!bytes) {
    return fail(bytes.status().message());
  }
  StatusOr<std::vector<int32_t>> ids = (*tokenizer)->encode(
      std::string(bytes->begin(), bytes->end()), addSpecial);
  if (!ids) {
    return fail(*writeInput + ": " + ids.status().message());
  }
  // MFTOKENS: the magic, then little-endian int32 ids (this host's order).
  Status written = writeFileAtomically(
      output, "token file", [&](FileWriter &writer) {
        writer.write("MFTOKENS", 8);
        writer.write(ids->data(), ids->size() * sizeof(int32_t));
        return Status::ok();
      });
  if (!written) {
    return fail(written.message());
  }
  std::fprintf(stderr, "mf-tokenize: wrote %zu tokens to %s\n", ids->size(),
               output.c_str());
  return 0;
}
