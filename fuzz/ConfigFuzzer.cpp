//===- ConfigFuzzer.cpp - fuzz the YAML frontend --------------------------===//
//
// Any text must parse into a validated ModelSpec or be rejected with
// diagnostics: no crash, no exception escaping, no unbounded work (alias
// bombs, absurd sizes). The input's first line, if it starts with "--set ",
// is applied as an override, as mfc compile --set would.
//
//===----------------------------------------------------------------------===//

#include "compiler/Frontend/ConfigTree.h"
#include "compiler/Frontend/ModelSpecReader.h"

#include "llvm/Support/raw_ostream.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  std::string override;
  if (text.consume_front("--set ")) {
    auto [line, rest] = text.split('\n');
    override = line.str();
    text = rest;
  }
  llvm::raw_null_ostream sink;
  mfc::ConfigDiagnostics diagnostics(sink);
  std::unique_ptr<mfc::ConfigNode> root =
      mfc::parseConfigText(diagnostics, text, "fuzz.yaml");
  if (!root || !root->isMap()) {
    return 0;
  }
  if (!override.empty() && !mfc::applyOverride(diagnostics, *root, override)) {
    return 0;
  }
  (void)mfc::readModelSpec(diagnostics, *root, "fuzz.yaml");
  return 0;
}
