//===- ChatTemplate.h - Hugging Face chat templates (a Jinja subset) -*- C++
//-*-===//
//
// A model's chat_template is a Jinja program over `messages`. This renders
// the subset the LLaMA family's templates use (Qwen's ChatML with its tool
// and reasoning branches, LLaMA-2's and LLaMA-3's): text, {{ }}, {% if /
// elif / else %}, {% for %} with `loop`, {% set %} (and namespace
// attributes), whitespace control, the filters, tests and string methods
// those templates call, raise_exception() and namespace(). It renders as
// Hugging Face's apply_chat_template does: trim_blocks and lstrip_blocks
// on, `tojson` as json.dumps(ensure_ascii=False). Anything outside the
// subset is an error naming it and its line, never a different prompt.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_TEXT_CHATTEMPLATE_H
#define MFC_RUNTIME_TEXT_CHATTEMPLATE_H

#include "runtime/base/Status.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mfrt {

struct ChatMessage {
  std::string role;
  std::string content;
};

class ChatTemplate {
public:
  /// Parses `source` (errors name the line).
  static StatusOr<ChatTemplate> parse(const std::string &source);
  ChatTemplate(ChatTemplate &&) noexcept;
  ChatTemplate &operator=(ChatTemplate &&) noexcept;
  ~ChatTemplate();

  /// Renders with `messages`, add_generation_prompt, and string variables
  /// (bos_token, eos_token, ...).
  StatusOr<std::string> render(
      const std::vector<ChatMessage> &messages, bool addGenerationPrompt,
      const std::vector<std::pair<std::string, std::string>> &variables) const;

  /// Renders with `messages` given as JSON (a list of objects, as in
  /// Hugging Face: role, content, tool_calls, ...) and `variables` as a JSON
  /// object.
  StatusOr<std::string> renderJson(const std::string &messagesJson,
                                   const std::string &variablesJson) const;

  struct Node;

private:
  ChatTemplate();
  std::vector<std::unique_ptr<Node>> body_;
};

} // namespace mfrt

#endif // MFC_RUNTIME_TEXT_CHATTEMPLATE_H
