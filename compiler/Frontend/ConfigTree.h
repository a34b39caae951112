//===- ConfigTree.h - a YAML document with source locations -----*- C++ -*-===//
//
// yaml-cpp parses the config; we copy it into this small tree so that the
// rest of the frontend is exception-free, keeps map order, and knows where
// in which buffer (the YAML file or a `--set` override) every node came from.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_COMPILER_FRONTEND_CONFIGTREE_H
#define MFC_COMPILER_FRONTEND_CONFIGTREE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SMLoc.h"
#include "llvm/Support/SourceMgr.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mfc {

/// One node of a parsed YAML document.
struct ConfigNode {
  enum class Kind { Null, Scalar, Sequence, Map };

  Kind kind = Kind::Null;
  /// The text of a scalar.
  std::string scalar;
  /// True for a quoted scalar ('4096' is a string, 4096 a number).
  bool quoted = false;
  /// Where the node starts.
  llvm::SMLoc loc;
  /// Sequence items, in order.
  std::vector<std::unique_ptr<ConfigNode>> items;
  /// Map entries in document order: key, where the key is, value.
  struct Entry {
    std::string key;
    llvm::SMLoc keyLoc;
    std::unique_ptr<ConfigNode> value;
  };
  std::vector<Entry> entries;

  bool isMap() const { return kind == Kind::Map; }
  bool isSequence() const { return kind == Kind::Sequence; }
  bool isScalar() const { return kind == Kind::Scalar; }
  bool isNull() const { return kind == Kind::Null; }

  /// The entry for `key` in a map, or null.
  Entry *find(llvm::StringRef key);
  const Entry *find(llvm::StringRef key) const;

  /// A short description for diagnostics: "a map", "the string 'abc'", ...
  std::string describe() const;
};

/// Counts and prints diagnostics against the buffers of one SourceMgr, in the
/// `file:line:col: error: message` form with the source line and a caret;
/// one without a location (a file that cannot be read) as
/// `<tool>: error: message`.
class ConfigDiagnostics {
public:
  explicit ConfigDiagnostics(llvm::raw_ostream &os,
                             llvm::StringRef tool = "mfc");

  llvm::SourceMgr &sourceMgr() { return sourceMgr_; }

  void error(llvm::SMLoc loc, const llvm::Twine &message,
             llvm::ArrayRef<llvm::SMFixIt> fixIts = {});
  void warning(llvm::SMLoc loc, const llvm::Twine &message,
               llvm::ArrayRef<llvm::SMFixIt> fixIts = {});
  void note(llvm::SMLoc loc, const llvm::Twine &message);

  unsigned errorCount() const { return errors_; }

  /// The buffer name, line and column of `loc` (line 0 when unknown).
  struct Position {
    std::string file;
    unsigned line = 0;
    unsigned column = 0;
  };
  Position position(llvm::SMLoc loc) const;

  /// True if `loc` is inside a `--set` override rather than the YAML file.
  bool isOverride(llvm::SMLoc loc) const;

private:
  void print(llvm::SMLoc loc, llvm::SourceMgr::DiagKind kind,
             const llvm::Twine &message, llvm::ArrayRef<llvm::SMFixIt> fixIts);

  llvm::SourceMgr sourceMgr_;
  llvm::raw_ostream &os_;
  std::string tool_;
  unsigned errors_ = 0;
};

/// Bounds on what a config may be: the largest real MindFormers config is
/// ~10 KB, a few hundred values and 5 levels deep.
constexpr uint64_t kMaxConfigBytes = 16u << 20;
constexpr size_t kMaxConfigNodes = 1u << 16;
constexpr unsigned kMaxConfigDepth = 256;

/// Parses `text` (registered with `diagnostics` under `bufferName`) into a
/// tree. Returns null after reporting a syntax error.
std::unique_ptr<ConfigNode> parseConfigText(ConfigDiagnostics &diagnostics,
                                            llvm::StringRef text,
                                            llvm::StringRef bufferName);

/// Reads and parses a YAML (or JSON) file whose top level must be a map,
/// described to the user as `expectedMap`. Returns null after reporting why
/// not.
std::unique_ptr<ConfigNode> parseConfigFile(
    ConfigDiagnostics &diagnostics, llvm::StringRef path,
    llvm::StringRef expectedMap =
        "the config to be a map of sections (run_mode, model, ...)");

/// Applies one `--set a.b.c=value` override to `root`. Missing maps on the
/// path are created (the schema then rejects keys it does not know, since
/// they come from --set); a path through a scalar or past the end of a list
/// is an error. The value is parsed as YAML, so `--set x=[1,2]` sets a list.
/// Returns false after reporting an error.
bool applyOverride(ConfigDiagnostics &diagnostics, ConfigNode &root,
                   llvm::StringRef assignment);

/// The closest candidate to `word` by edit distance, or "" if none is close
/// enough to be a plausible typo.
std::string closestMatch(llvm::StringRef word,
                         llvm::ArrayRef<llvm::StringRef> candidates);

} // namespace mfc

#endif // MFC_COMPILER_FRONTEND_CONFIGTREE_H
