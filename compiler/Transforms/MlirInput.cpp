//===- MlirInput.cpp - IR that mfc tools read -----------------------------===//

#include "compiler/Transforms/MlirInput.h"

#include "mlir/Parser/Parser.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/thread.h"

using namespace mlir;
using llvm::StringRef;

const char *mfc::tooDeeplyNested(llvm::StringRef text) {
  unsigned depth = 0;
  for (const char *at = text.begin(); at < text.end(); ++at) {
    switch (*at) {
    case '"': // a string: to its closing quote, past escapes
      for (++at; at < text.end() && *at != '"'; ++at) {
        at += *at == '\\';
      }
      break;
    case '/':
      if (at + 1 < text.end() && at[1] == '/') {
        while (at < text.end() && *at != '\n') {
          ++at;
        }
      }
      break;
    case '{':
    case '(':
    case '[':
      if (++depth > kMaxMlirNesting) {
        return at;
      }
      break;
    case '}':
    case ')':
    case ']':
      depth -= depth > 0;
      break;
    default:
      break;
    }
  }
  return nullptr;
}

bool mfc::looksLikeMlir(llvm::StringRef text) {
  while (!text.empty()) {
    auto [line, rest] = text.split('\n');
    text = rest;
    line = line.trim();
    if (line.empty() || line.starts_with("//")) {
      continue;
    }
    if (line.starts_with("%YAML") || line.starts_with("%TAG")) {
      return false; // YAML's directives
    }
    if (line.starts_with("{-#")) {
      return true; // a file-level resource
    }
    if (line.consume_front("\"")) {
      // A generic-form op ("builtin.module"() ...), not a quoted YAML key.
      size_t close = line.find('"');
      return close != StringRef::npos &&
             line.drop_front(close + 1).starts_with("(");
    }
    if (line.consume_front("#") || line.consume_front("!")) {
      // An alias (`#map = ...`); YAML's comments start "# ".
      size_t name = line.find_if_not([](char c) {
        return llvm::isAlnum(c) || c == '_' || c == '.' || c == '$' || c == '-';
      });
      return name != StringRef::npos && name > 0 &&
             line.drop_front(name).ltrim().starts_with("=");
    }
    // An op: `module`, `module attributes {...}`, `%x = ...`, or a
    // dialect's op by name (`func.func @f(...)`); YAML's `a.b: c` is a key.
    if (line.starts_with("%")) {
      return true;
    }
    size_t name = line.find_if_not([](char c) {
      return llvm::isAlnum(c) || c == '_' || c == '.' || c == '$';
    });
    name = std::min(name, line.size());
    StringRef op = line.take_front(name), after = line.drop_front(name);
    bool opStarts = after.empty() || after.front() == ' ' ||
                    after.front() == '{' || after.front() == '(';
    return opStarts && (op == "module" || op.contains('.'));
  }
  return false;
}

OwningOpRef<ModuleOp>
mfc::parseMlirInput(std::unique_ptr<llvm::MemoryBuffer> input,
                    MLIRContext &context, llvm::SourceMgr &sources) {
  const char *deep = tooDeeplyNested(input->getBuffer());
  unsigned id = sources.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  if (deep) {
    sources.PrintMessage(llvm::SMLoc::getFromPointer(deep),
                         llvm::SourceMgr::DK_Error,
                         "nested more than " + llvm::Twine(kMaxMlirNesting) +
                             " levels deep; mfc reads at most that");
    return nullptr;
  }
  (void)id;
  OwningOpRef<ModuleOp> module;
  llvm::thread parser(std::optional<unsigned>(kMlirParserStackBytes), [&] {
    module = parseSourceFile<ModuleOp>(sources, &context);
  });
  parser.join();
  return module;
}
