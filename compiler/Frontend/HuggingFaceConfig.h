//===- HuggingFaceConfig.h - config.json under a MindFormers YAML -*- C++
//-*-===//
//
// MindFormers' newest configs name no model.arch: `pretrained_model_dir`
// points at a Hugging Face model folder, whose config.json (and
// generation_config.json) give the architecture and the sizes, and the
// YAML's model_config keys win (MindFormers' merge_model_config). Both
// spell some keys as Hugging Face does.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_COMPILER_FRONTEND_HUGGINGFACECONFIG_H
#define MFC_COMPILER_FRONTEND_HUGGINGFACECONFIG_H

#include "compiler/Frontend/ConfigTree.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

namespace mfc {

/// A model_config key that Hugging Face (or MindFormers' newer configs)
/// spell `other` and mfc reads as `canonical`.
struct KeySpelling {
  llvm::StringRef other;
  llvm::StringRef canonical;
};
llvm::ArrayRef<KeySpelling> modelKeySpellings();

/// The name mfc reads `key` as (itself unless it is another spelling).
llvm::StringRef canonicalModelKey(llvm::StringRef key);

/// A path the YAML names (pretrained_model_dir, load_checkpoint, a
/// tokenizer file), relative to the YAML's folder when it is relative;
/// absolute and without dots.
std::string resolveBesideConfig(llvm::StringRef path, llvm::StringRef yamlPath);

/// With a top-level `pretrained_model_dir`: reads the folder's config.json
/// and generation_config.json. When the YAML names no model.arch, their
/// keys join model.model_config where the YAML has no key of the same
/// meaning (entries keep their locations in the JSON files); where the YAML
/// has one, and it differs, a warning says which value is compiled. When
/// the YAML names model.arch, config.json is only compared. Returns false
/// after reporting an error (the folder or its config.json missing or
/// unreadable).
bool mergePretrainedModelDir(ConfigDiagnostics &diagnostics, ConfigNode &root,
                             llvm::StringRef yamlPath);

} // namespace mfc

#endif // MFC_COMPILER_FRONTEND_HUGGINGFACECONFIG_H
