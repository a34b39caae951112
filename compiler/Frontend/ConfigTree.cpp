//===- ConfigTree.cpp - a YAML document with source locations -------------===//

#include "compiler/Frontend/ConfigTree.h"

#include "compiler/Transforms/InputFile.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <yaml-cpp/yaml.h>

using namespace mfc;
using llvm::SMLoc;
using llvm::StringRef;

ConfigNode::Entry *ConfigNode::find(StringRef key) {
  for (Entry &entry : entries) {
    if (entry.key == key) {
      return &entry;
    }
  }
  return nullptr;
}

const ConfigNode::Entry *ConfigNode::find(StringRef key) const {
  return const_cast<ConfigNode *>(this)->find(key);
}

std::string ConfigNode::describe() const {
  switch (kind) {
  case Kind::Null:
    return "nothing (null)";
  case Kind::Sequence:
    return "a list";
  case Kind::Map:
    return "a map";
  case Kind::Scalar:
    return (quoted ? "the string '" : "'") + scalar + "'";
  }
  return "?";
}

//===----------------------------------------------------------------------===//
// ConfigDiagnostics
//===----------------------------------------------------------------------===//

ConfigDiagnostics::ConfigDiagnostics(llvm::raw_ostream &os, StringRef tool)
    : os_(os), tool_(tool.str()) {}

void ConfigDiagnostics::print(SMLoc loc, llvm::SourceMgr::DiagKind kind,
                              const llvm::Twine &message,
                              llvm::ArrayRef<llvm::SMFixIt> fixIts) {
  if (loc.isValid()) {
    sourceMgr_.PrintMessage(os_, loc, kind, message, {}, fixIts);
    return;
  }
  // SourceMgr would print "<unknown>:0:" for a message about no place.
  llvm::SMDiagnostic("", kind, message.str())
      .print(tool_.c_str(), os_, /*ShowColors=*/true, /*ShowKindLabel=*/true);
}

void ConfigDiagnostics::error(SMLoc loc, const llvm::Twine &message,
                              llvm::ArrayRef<llvm::SMFixIt> fixIts) {
  ++errors_;
  print(loc, llvm::SourceMgr::DK_Error, message, fixIts);
}

void ConfigDiagnostics::warning(SMLoc loc, const llvm::Twine &message,
                                llvm::ArrayRef<llvm::SMFixIt> fixIts) {
  print(loc, llvm::SourceMgr::DK_Warning, message, fixIts);
}

void ConfigDiagnostics::note(SMLoc loc, const llvm::Twine &message) {
  print(loc, llvm::SourceMgr::DK_Note, message, {});
}

ConfigDiagnostics::Position ConfigDiagnostics::position(SMLoc loc) const {
  Position result;
  if (!loc.isValid()) {
    return result;
  }
  unsigned buffer = sourceMgr_.FindBufferContainingLoc(loc);
  if (buffer == 0) {
    return result;
  }
  result.file =
      sourceMgr_.getMemoryBuffer(buffer)->getBufferIdentifier().str();
  std::tie(result.line, result.column) =
      sourceMgr_.getLineAndColumn(loc, buffer);
  return result;
}

bool ConfigDiagnostics::isOverride(SMLoc loc) const {
  return position(loc).file == "<--set>";
}

//===----------------------------------------------------------------------===//
// Parsing
//===----------------------------------------------------------------------===//

namespace {

/// Converts yaml-cpp nodes into ConfigNodes located in one buffer. Text that
/// starts `columnOffset` bytes into the buffer's first line (a `--set` value)
/// has its first-line columns shifted accordingly.
class TreeBuilder {
public:
  TreeBuilder(ConfigDiagnostics &diagnostics, unsigned bufferId,
              unsigned columnOffset)
      : diagnostics_(diagnostics), bufferId_(bufferId),
        columnOffset_(columnOffset) {}

  SMLoc locate(const YAML::Mark &mark, SMLoc fallback) const {
    if (mark.is_null() || mark.line < 0 || mark.column < 0) {
      return fallback;
    }
    unsigned column = mark.column + 1 + (mark.line == 0 ? columnOffset_ : 0);
    SMLoc loc = diagnostics_.sourceMgr().FindLocForLineAndColumn(
        bufferId_, mark.line + 1, column);
    return loc.isValid() ? loc : fallback;
  }

  std::unique_ptr<ConfigNode> build(const YAML::Node &node, SMLoc fallback,
                                    unsigned depth = 0) {
    // An alias inside its own anchor makes yaml-cpp's graph a cycle.
    if (depth > kMaxConfigDepth) {
      diagnostics_.error(locate(node.Mark(), fallback),
                         "the config nests more than " +
                             llvm::Twine(kMaxConfigDepth) +
                             " levels deep (a YAML alias inside its own "
                             "anchor?)");
      return nullptr;
    }
    // Aliases share nodes in yaml-cpp's graph but are copied here: ten
    // levels of nine aliases would expand to 9^10 nodes from a few lines.
    if (++built_ > kMaxConfigNodes) {
      diagnostics_.error(locate(node.Mark(), fallback),
                         "the config expands to more than " +
                             llvm::Twine(kMaxConfigNodes) +
                             " values (YAML aliases repeated within "
                             "aliases?); a real config has a few hundred");
      return nullptr;
    }
    auto result = std::make_unique<ConfigNode>();
    result->loc = locate(node.Mark(), fallback);
    switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      // An empty value has no text of its own; yaml-cpp marks the next
      // token. Point at the key instead.
      result->kind = ConfigNode::Kind::Null;
      result->loc = fallback;
      break;
    case YAML::NodeType::Scalar:
      // An alias copies its text too: a long scalar behind many aliases.
      if (!copyText(node.Scalar().size(), result->loc)) {
        return nullptr;
      }
      result->kind = ConfigNode::Kind::Scalar;
      result->scalar = node.Scalar();
      result->quoted = node.Tag() == "!";
      break;
    case YAML::NodeType::Sequence:
      result->kind = ConfigNode::Kind::Sequence;
      for (const YAML::Node &item : node) {
        auto child = build(item, result->loc, depth + 1);
        if (!child) {
          return nullptr;
        }
        result->items.push_back(std::move(child));
      }
      break;
    case YAML::NodeType::Map:
      result->kind = ConfigNode::Kind::Map;
      for (const auto &pair : node) {
        SMLoc keyLoc = locate(pair.first.Mark(), result->loc);
        if (!pair.first.IsScalar()) {
          diagnostics_.error(keyLoc, "expected a plain key here, got a " +
                                         llvm::Twine(pair.first.IsMap()
                                                         ? "map"
                                                         : "list"));
          return nullptr;
        }
        std::string key = pair.first.Scalar();
        if (!copyText(key.size(), keyLoc)) { // keys are copied with their map
          return nullptr;
        }
        if (const ConfigNode::Entry *previous = result->find(key)) {
          diagnostics_.error(keyLoc, "duplicate key '" + key +
                                         "': YAML keeps only one of them; "
                                         "remove one");
          diagnostics_.note(previous->keyLoc, "first defined here");
          return nullptr;
        }
        auto value = build(pair.second, keyLoc, depth + 1);
        if (!value) {
          return nullptr;
        }
        result->entries.push_back({key, keyLoc, std::move(value)});
      }
      break;
    }
    return result;
  }

private:
  /// Counts `bytes` of copied text; false after an error past the bound.
  bool copyText(size_t bytes, SMLoc loc) {
    copiedBytes_ += bytes;
    if (copiedBytes_ <= kMaxConfigBytes) {
      return true;
    }
    diagnostics_.error(loc, "the config expands to more than " +
                                llvm::Twine(kMaxConfigBytes) +
                                " bytes of values (YAML aliases of long "
                                "values?)");
    return false;
  }

  ConfigDiagnostics &diagnostics_;
  unsigned bufferId_;
  unsigned columnOffset_;
  size_t built_ = 0;
  uint64_t copiedBytes_ = 0;
};

/// The `---` that starts a second document, or null. A document marker is
/// `---` at the start of a line followed by a space or the line's end (YAML
/// reads it so even inside a block scalar). Found in the text, not with
/// YAML::LoadAll: yaml-cpp 0.7's LoadAll loops, taking memory without bound,
/// on some malformed input (",[s", found by the ConfigFuzzer).
const char *secondDocument(StringRef text) {
  bool content = false;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    StringRef line = text.slice(at, end);
    StringRef trimmed = line.ltrim();
    bool marker = line.starts_with("---") &&
                  (line.size() == 3 || line[3] == ' ' || line[3] == '\t' ||
                   line[3] == '\r');
    if (marker && content) {
      return line.data();
    }
    if (!marker && !trimmed.empty() && !trimmed.starts_with("#")) {
      content = true;
    }
    if (end == StringRef::npos) {
      break;
    }
    at = end + 1;
  }
  return nullptr;
}

std::unique_ptr<ConfigNode> parseBuffer(ConfigDiagnostics &diagnostics,
                                        unsigned bufferId, StringRef text,
                                        unsigned columnOffset) {
  TreeBuilder builder(diagnostics, bufferId, columnOffset);
  SMLoc start = llvm::SMLoc::getFromPointer(
      diagnostics.sourceMgr().getMemoryBuffer(bufferId)->getBufferStart());
  if (const char *marker = secondDocument(text)) {
    diagnostics.error(SMLoc::getFromPointer(
                          diagnostics.sourceMgr().getMemoryBuffer(bufferId)
                              ->getBufferStart() +
                          (marker - text.data()) + columnOffset),
                      "a second YAML document ('---'): a config is one "
                      "document; remove this one or put it in its own file");
    return nullptr;
  }
  try {
    return builder.build(YAML::Load(text.str()), start);
  } catch (const YAML::ParserException &e) {
    diagnostics.error(builder.locate(e.mark, start),
                      "malformed YAML: " + llvm::Twine(e.msg));
  } catch (const YAML::Exception &e) {
    diagnostics.error(builder.locate(e.mark, start),
                      "cannot read YAML: " + llvm::Twine(e.msg));
  }
  return nullptr;
}

} // namespace

std::unique_ptr<ConfigNode> mfc::parseConfigText(ConfigDiagnostics &diagnostics,
                                                 StringRef text,
                                                 StringRef bufferName) {
  unsigned bufferId = diagnostics.sourceMgr().AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(text, bufferName), SMLoc());
  return parseBuffer(diagnostics, bufferId, text, 0);
}

std::unique_ptr<ConfigNode> mfc::parseConfigFile(ConfigDiagnostics &diagnostics,
                                                 StringRef path,
                                                 StringRef expectedMap) {
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> file =
      readInputFile(path, "config", kMaxConfigBytes, error);
  if (!file) {
    diagnostics.error(SMLoc(), error);
    return nullptr;
  }
  StringRef text = file->getBuffer();
  unsigned bufferId =
      diagnostics.sourceMgr().AddNewSourceBuffer(std::move(file), SMLoc());
  auto root = parseBuffer(diagnostics, bufferId, text, 0);
  if (root && !root->isMap()) {
    diagnostics.error(root->loc,
                      "expected " + expectedMap + ", got " + root->describe());
    return nullptr;
  }
  return root;
}

//===----------------------------------------------------------------------===//
// Overrides
//===----------------------------------------------------------------------===//

std::string mfc::closestMatch(StringRef word,
                              llvm::ArrayRef<StringRef> candidates) {
  std::string best;
  unsigned bestDistance = std::max<size_t>(2, word.size() / 3) + 1;
  for (StringRef candidate : candidates) {
    unsigned distance = word.edit_distance(candidate, true, bestDistance);
    if (distance < bestDistance) {
      bestDistance = distance;
      best = candidate.str();
    }
  }
  return best;
}

bool mfc::applyOverride(ConfigDiagnostics &diagnostics, ConfigNode &root,
                        StringRef assignment) {
  unsigned bufferId = diagnostics.sourceMgr().AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(assignment, "<--set>"), SMLoc());
  const char *base =
      diagnostics.sourceMgr().getMemoryBuffer(bufferId)->getBufferStart();
  auto locAt = [&](size_t offset) { return SMLoc::getFromPointer(base + offset); };

  size_t equals = assignment.find('=');
  if (equals == StringRef::npos || equals == 0) {
    diagnostics.error(locAt(0), "expected --set key.path=value, e.g. "
                                "--set model.model_config.num_layers=2");
    return false;
  }
  StringRef path = assignment.take_front(equals);
  auto value = parseBuffer(diagnostics, bufferId,
                           assignment.drop_front(equals + 1), equals + 1);
  if (!value) {
    return false;
  }

  llvm::SmallVector<StringRef> segments;
  path.split(segments, '.');
  ConfigNode *node = &root;
  size_t offset = 0;
  std::string walked;
  for (auto [index, segment] : llvm::enumerate(segments)) {
    SMLoc segmentLoc = locAt(offset);
    bool last = index + 1 == segments.size();
    std::string where = walked.empty() ? "the top level" : "'" + walked + "'";
    if (segment.empty()) {
      diagnostics.error(segmentLoc, "empty key in --set path '" + path + "'");
      return false;
    }
    if (node->isSequence()) {
      unsigned position;
      if (segment.getAsInteger(10, position) || position >= node->items.size()) {
        diagnostics.error(segmentLoc,
                          where + " is a list of " +
                              llvm::Twine(node->items.size()) +
                              " items: expected an index below that, got '" +
                              segment + "'");
        return false;
      }
      if (last) {
        node->items[position] = std::move(value);
        return true;
      }
      node = node->items[position].get();
    } else if (node->isMap()) {
      ConfigNode::Entry *entry = node->find(segment);
      if (last) {
        if (entry) {
          entry->value = std::move(value);
        } else {
          node->entries.push_back({segment.str(), segmentLoc, std::move(value)});
        }
        return true;
      }
      if (!entry) {
        // A section the file does not have: create it. Whether the key is
        // valid there is for the schema to say; it rejects unknown keys that
        // come from --set, with a suggestion.
        auto section = std::make_unique<ConfigNode>();
        section->kind = ConfigNode::Kind::Map;
        section->loc = segmentLoc;
        node->entries.push_back({segment.str(), segmentLoc, std::move(section)});
        entry = &node->entries.back();
      }
      node = entry->value.get();
    } else {
      diagnostics.error(segmentLoc, where + " is " + node->describe() +
                                        ", not a map: cannot set '" +
                                        segment + "' inside it");
      return false;
    }
    walked += (walked.empty() ? "" : ".") + segment.str();
    offset += segment.size() + 1;
  }
  return true;
}
