//===- ChatTemplate.cpp - a Jinja subset for chat templates ---------------===//
//
// 1. The source is cut into text and tags ({{ }}, {% %}, {# #}); whitespace
//    control (`-`) and Hugging Face's trim_blocks / lstrip_blocks apply.
// 2. Tags are parsed into a tree: statements (if, for, set) and
//    expressions (Jinja's precedence: or, and, not, comparisons and tests,
//    ~, + -, * / // %, unary, postfix . [] () and | filters).
// 3. Rendering walks the tree with Python's semantics for truth, equality,
//    `in` and string methods, and Jinja's for undefined values and scopes
//    (a `set` inside a loop stays in that iteration; namespaces do not).
//
//===----------------------------------------------------------------------===//

#include "runtime/text/ChatTemplate.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

using namespace mfrt;

namespace {

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

struct Value;
using List = std::vector<Value>;
using Map = std::vector<std::pair<std::string, Value>>; // insertion order

struct Value {
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Map };
  Kind kind = Kind::Undefined;
  bool boolean = false;
  int64_t integer = 0;
  double number = 0;
  std::string text;
  std::shared_ptr<List> list; // shared: a namespace or list is one object
  std::shared_ptr<Map> map;

  static Value none() { return make(Kind::None); }
  static Value of(bool value) {
    Value v = make(Kind::Bool);
    v.boolean = value;
    return v;
  }
  static Value of(int64_t value) {
    Value v = make(Kind::Int);
    v.integer = value;
    return v;
  }
  static Value of(double value) {
    Value v = make(Kind::Float);
    v.number = value;
    return v;
  }
  static Value of(std::string value) {
    Value v = make(Kind::String);
    v.text = std::move(value);
    return v;
  }
  static Value ofList(List items) {
    Value v = make(Kind::List);
    v.list = std::make_shared<List>(std::move(items));
    return v;
  }
  static Value ofMap(Map entries) {
    Value v = make(Kind::Map);
    v.map = std::make_shared<Map>(std::move(entries));
    return v;
  }
  static Value make(Kind kind) {
    Value v;
    v.kind = kind;
    return v;
  }

  bool isNumber() const { return kind == Kind::Int || kind == Kind::Float; }
  double asDouble() const {
    return kind == Kind::Int ? static_cast<double>(integer) : number;
  }
  const Value *find(const std::string &key) const {
    if (kind != Kind::Map) {
      return nullptr;
    }
    for (const auto &[name, value] : *map) {
      if (name == key) {
        return &value;
      }
    }
    return nullptr;
  }
  void set(const std::string &key, Value value) {
    for (auto &[name, existing] : *map) {
      if (name == key) {
        existing = std::move(value);
        return;
      }
    }
    map->emplace_back(key, std::move(value));
  }
};

const char *kindName(const Value &v) {
  switch (v.kind) {
  case Value::Kind::Undefined:
    return "undefined";
  case Value::Kind::None:
    return "none";
  case Value::Kind::Bool:
    return "a boolean";
  case Value::Kind::Int:
    return "an integer";
  case Value::Kind::Float:
    return "a number";
  case Value::Kind::String:
    return "a string";
  case Value::Kind::List:
    return "a list";
  case Value::Kind::Map:
    return "a mapping";
  }
  return "?";
}

bool truthy(const Value &v) {
  switch (v.kind) {
  case Value::Kind::Undefined:
  case Value::Kind::None:
    return false;
  case Value::Kind::Bool:
    return v.boolean;
  case Value::Kind::Int:
    return v.integer != 0;
  case Value::Kind::Float:
    return v.number != 0;
  case Value::Kind::String:
    return !v.text.empty();
  case Value::Kind::List:
    return !v.list->empty();
  case Value::Kind::Map:
    return !v.map->empty();
  }
  return false;
}

bool equal(const Value &a, const Value &b) {
  if (a.isNumber() && b.isNumber()) {
    return a.asDouble() == b.asDouble();
  }
  if (a.kind == Value::Kind::Bool && b.isNumber()) {
    return (a.boolean ? 1.0 : 0.0) == b.asDouble();
  }
  if (b.kind == Value::Kind::Bool && a.isNumber()) {
    return equal(b, a);
  }
  if (a.kind != b.kind) {
    return false;
  }
  switch (a.kind) {
  case Value::Kind::Undefined:
  case Value::Kind::None:
    return true;
  case Value::Kind::Bool:
    return a.boolean == b.boolean;
  case Value::Kind::String:
    return a.text == b.text;
  case Value::Kind::List:
    return a.list->size() == b.list->size() &&
           std::equal(a.list->begin(), a.list->end(), b.list->begin(), equal);
  case Value::Kind::Map:
    if (a.map->size() != b.map->size()) {
      return false;
    }
    for (const auto &[key, value] : *a.map) {
      const Value *other = b.find(key);
      if (!other || !equal(value, *other)) {
        return false;
      }
    }
    return true;
  default:
    return false;
  }
}

/// Python's repr of a float (shortest round trip, ".0" when integral).
std::string formatFloat(double value) {
  if (std::isnan(value)) {
    return "nan";
  }
  if (std::isinf(value)) {
    return value > 0 ? "inf" : "-inf";
  }
  char buffer[64];
  auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value);
  std::string text(buffer, end);
  if (text.find_first_of(".eE") == std::string::npos) {
    text += ".0";
  }
  return text;
}

/// A string's characters (Python indexes, slices and counts code points;
/// the text is UTF-8, a stray byte counts as one).
std::vector<std::string> characters(const std::string &text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size();) {
    unsigned char lead = static_cast<unsigned char>(text[i]);
    size_t length = lead < 0x80           ? 1
                    : (lead >> 5) == 0x6  ? 2
                    : (lead >> 4) == 0xE  ? 3
                    : (lead >> 3) == 0x1E ? 4
                                          : 1;
    length = std::min(length, text.size() - i);
    out.push_back(text.substr(i, length));
    i += length;
  }
  return out;
}

std::string repr(const Value &v);

/// What {{ value }} prints: Python's str().
std::string str(const Value &v) {
  switch (v.kind) {
  case Value::Kind::Undefined:
    return "";
  case Value::Kind::None:
    return "None";
  case Value::Kind::Bool:
    return v.boolean ? "True" : "False";
  case Value::Kind::Int:
    return std::to_string(v.integer);
  case Value::Kind::Float:
    return formatFloat(v.number);
  case Value::Kind::String:
    return v.text;
  default:
    return repr(v);
  }
}

std::string repr(const Value &v) {
  switch (v.kind) {
  case Value::Kind::String: {
    bool single = v.text.find('\'') == std::string::npos ||
                  v.text.find('"') != std::string::npos;
    char quote = single ? '\'' : '"';
    std::string out(1, quote);
    for (char c : v.text) {
      if (c == '\\' || c == quote) {
        out += '\\';
        out += c;
      } else if (c == '\n') {
        out += "\\n";
      } else if (c == '\t') {
        out += "\\t";
      } else if (c == '\r') {
        out += "\\r";
      } else {
        out += c;
      }
    }
    return out + quote;
  }
  case Value::Kind::List: {
    std::string out = "[";
    for (size_t i = 0; i < v.list->size(); ++i) {
      out += (i ? ", " : "") + repr((*v.list)[i]);
    }
    return out + "]";
  }
  case Value::Kind::Map: {
    std::string out = "{";
    for (size_t i = 0; i < v.map->size(); ++i) {
      out += (i ? ", " : "") + repr(Value::of((*v.map)[i].first)) + ": " +
             repr((*v.map)[i].second);
    }
    return out + "}";
  }
  default:
    return str(v);
  }
}

/// json.dumps(value, ensure_ascii=False): Hugging Face's tojson.
void toJson(const Value &v, std::string &out) {
  switch (v.kind) {
  case Value::Kind::Undefined:
  case Value::Kind::None:
    out += "null";
    return;
  case Value::Kind::Bool:
    out += v.boolean ? "true" : "false";
    return;
  case Value::Kind::Int:
    out += std::to_string(v.integer);
    return;
  case Value::Kind::Float:
    out += std::isfinite(v.number) ? formatFloat(v.number)
           : std::isnan(v.number)  ? "NaN"
           : v.number > 0          ? "Infinity"
                                   : "-Infinity";
    return;
  case Value::Kind::String:
    out += '"';
    for (char c : v.text) {
      unsigned char u = static_cast<unsigned char>(c);
      switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (u < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", u);
          out += escaped;
        } else {
          out += c;
        }
      }
    }
    out += '"';
    return;
  case Value::Kind::List:
    out += '[';
    for (size_t i = 0; i < v.list->size(); ++i) {
      out += i ? ", " : "";
      toJson((*v.list)[i], out);
    }
    out += ']';
    return;
  case Value::Kind::Map:
    out += '{';
    for (size_t i = 0; i < v.map->size(); ++i) {
      out += i ? ", " : "";
      toJson(Value::of((*v.map)[i].first), out);
      out += ": ";
      toJson((*v.map)[i].second, out);
    }
    out += '}';
    return;
  }
}

Value fromJson(const nlohmann::ordered_json &json) {
  switch (json.type()) {
  case nlohmann::ordered_json::value_t::null:
    return Value::none();
  case nlohmann::ordered_json::value_t::boolean:
    return Value::of(json.get<bool>());
  case nlohmann::ordered_json::value_t::number_integer:
  case nlohmann::ordered_json::value_t::number_unsigned:
    return Value::of(json.get<int64_t>());
  case nlohmann::ordered_json::value_t::number_float:
    return Value::of(json.get<double>());
  case nlohmann::ordered_json::value_t::string:
    return Value::of(json.get<std::string>());
  case nlohmann::ordered_json::value_t::array: {
    List items;
    for (const auto &item : json) {
      items.push_back(fromJson(item));
    }
    return Value::ofList(std::move(items));
  }
  case nlohmann::ordered_json::value_t::object: {
    Map entries;
    for (auto item = json.begin(); item != json.end(); ++item) {
      entries.emplace_back(item.key(), fromJson(item.value()));
    }
    return Value::ofMap(std::move(entries));
  }
  default:
    return Value();
  }
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

struct Expr {
  enum class Kind {
    Literal,
    Name,
    Attr,
    Item,
    Slice,
    Call,
    Filter,
    Test,
    Unary,
    Binary,
    Conditional,
    ListLiteral,
    DictLiteral
  } kind;
  int line = 0;
  Value literal;
  std::string name; // Name, Attr, Filter, Test, Unary/Binary operator
  std::vector<std::unique_ptr<Expr>> args;
  std::vector<std::pair<std::string, std::unique_ptr<Expr>>> keywords;
  bool negated = false; // `is not`
};

/// Appends `code` to `out` as UTF-8.
void appendUtf8(uint32_t code, std::string &out) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xC0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else if (code < 0x10000) {
    out += static_cast<char>(0xE0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code >> 18));
    out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
}

/// The escape at source[at] (a backslash) of a string literal, as jinja2
/// decodes literals (Python's unicode-escape): appended to `out`, `at`
/// moved past it; an error for a malformed one and for \N{name}, whose
/// Unicode name table mfc does not carry.
std::optional<std::string> unescape(const std::string &source, size_t &at,
                                    std::string &out) {
  char e = source[at + 1];
  auto hex = [&](size_t digits) -> std::optional<uint32_t> {
    if (at + 2 + digits > source.size()) {
      return std::nullopt;
    }
    uint32_t value = 0;
    for (size_t k = 0; k < digits; ++k) {
      char d = source[at + 2 + k];
      int v = std::isdigit(static_cast<unsigned char>(d)) ? d - '0'
              : (d >= 'a' && d <= 'f')                    ? d - 'a' + 10
              : (d >= 'A' && d <= 'F')                    ? d - 'A' + 10
                                                          : -1;
      if (v < 0) {
        return std::nullopt;
      }
      value = value * 16 + static_cast<uint32_t>(v);
    }
    return value;
  };
  static const std::string simple = "\\'\"abfnrtv";
  static const std::string meaning = "\\'\"\a\b\f\n\r\t\v";
  if (size_t k = simple.find(e); k != std::string::npos) {
    out += meaning[k];
    at += 2;
    return std::nullopt;
  }
  if (e == '\n') { // a line continuation
    at += 2;
    return std::nullopt;
  }
  if (e >= '0' && e <= '7') {
    uint32_t value = 0;
    size_t k = at + 1;
    for (; k < source.size() && k < at + 4 && source[k] >= '0' &&
           source[k] <= '7';
         ++k) {
      value = value * 8 + static_cast<uint32_t>(source[k] - '0');
    }
    appendUtf8(value, out);
    at = k;
    return std::nullopt;
  }
  if (e == 'x' || e == 'u' || e == 'U') {
    size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
    std::optional<uint32_t> code = hex(digits);
    if (!code || *code > 0x10FFFF || (*code >= 0xD800 && *code <= 0xDFFF)) {
      return "a string literal's \\" + std::string(1, e) + " escape needs " +
             std::to_string(digits) +
             " hex digits of a Unicode scalar value (as in Python)";
    }
    appendUtf8(*code, out);
    at += 2 + digits;
    return std::nullopt;
  }
  if (e == 'N') {
    return "a string literal's \\N{...} escape (a character by its Unicode "
           "name) is not supported; write the character itself";
  }
  out += '\\'; // Python keeps an unknown escape as it is
  out += e;
  at += 2;
  return std::nullopt;
}

struct Token {
  enum class Kind { Name, String, Int, Float, Op, End } kind;
  std::string text;
};

StatusOr<std::vector<Token>> tokenize(const std::string &source, int line) {
  std::vector<Token> tokens;
  auto fail = [&](const std::string &message) {
    return Status::error(StatusCode::InvalidArgument, "chat template line " +
                                                          std::to_string(line) +
                                                          ": " + message);
  };
  size_t i = 0;
  while (i < source.size()) {
    char c = source[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t start = i;
      while (i < source.size() &&
             (std::isalnum(static_cast<unsigned char>(source[i])) ||
              source[i] == '_')) {
        ++i;
      }
      tokens.push_back({Token::Kind::Name, source.substr(start, i - start)});
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t start = i;
      bool isFloat = false;
      while (i < source.size() &&
             (std::isdigit(static_cast<unsigned char>(source[i])) ||
              (source[i] == '.' && i + 1 < source.size() &&
               std::isdigit(static_cast<unsigned char>(source[i + 1]))))) {
        isFloat |= source[i] == '.';
        ++i;
      }
      tokens.push_back({isFloat ? Token::Kind::Float : Token::Kind::Int,
                        source.substr(start, i - start)});
      continue;
    }
    if (c == '\'' || c == '"') {
      std::string text;
      ++i;
      while (i < source.size() && source[i] != c) {
        if (source[i] == '\\' && i + 1 < source.size()) {
          std::optional<std::string> error = unescape(source, i, text);
          if (error) {
            return fail(*error);
          }
          continue;
        }
        text += source[i++];
      }
      if (i >= source.size()) {
        return fail("a string literal is not closed");
      }
      ++i;
      tokens.push_back({Token::Kind::String, text});
      continue;
    }
    static const char *pairs[] = {"==", "!=", "<=", ">=", "//", "**"};
    bool matched = false;
    for (const char *pair : pairs) {
      if (source.compare(i, 2, pair) == 0) {
        tokens.push_back({Token::Kind::Op, pair});
        i += 2;
        matched = true;
        break;
      }
    }
    if (matched) {
      continue;
    }
    if (std::string("()[]{}.,:|+-*/%~<>=").find(c) != std::string::npos) {
      tokens.push_back({Token::Kind::Op, std::string(1, c)});
      ++i;
      continue;
    }
    return fail(std::string("unexpected character '") + c + "'");
  }
  // Real tags hold tens of tokens; the bound keeps the trees (whose depth
  // a chain like a + b + c + ... grows) far from the stack's limit.
  if (tokens.size() > 4096) {
    return fail("a tag of " + std::to_string(tokens.size()) +
                " tokens; at most 4096");
  }
  tokens.push_back({Token::Kind::End, ""});
  return tokens;
}

class ExprParser {
public:
  ExprParser(std::vector<Token> tokens, int line)
      : tokens_(std::move(tokens)), line_(line) {}

  StatusOr<std::unique_ptr<Expr>> parseExpression() {
    std::unique_ptr<Expr> expr = conditional();
    if (!error_.empty()) {
      return fail(error_);
    }
    return expr;
  }
  bool atEnd() const { return peek().kind == Token::Kind::End; }
  const Token &peek(size_t ahead = 0) const {
    return tokens_[std::min(position_ + ahead, tokens_.size() - 1)];
  }
  bool acceptName(const char *name) {
    if (peek().kind == Token::Kind::Name && peek().text == name) {
      ++position_;
      return true;
    }
    return false;
  }
  bool acceptOp(const char *op) {
    if (peek().kind == Token::Kind::Op && peek().text == op) {
      ++position_;
      return true;
    }
    return false;
  }
  std::optional<std::string> takeName() {
    if (peek().kind != Token::Kind::Name) {
      return std::nullopt;
    }
    return tokens_[position_++].text;
  }
  Status fail(const std::string &message) const {
    return Status::error(StatusCode::InvalidArgument,
                         "chat template line " + std::to_string(line_) + ": " +
                             message);
  }
  const std::string &error() const { return error_; }

private:
  std::unique_ptr<Expr> node(Expr::Kind kind) {
    auto expr = std::make_unique<Expr>();
    expr->kind = kind;
    expr->line = line_;
    return expr;
  }
  std::unique_ptr<Expr> binary(const std::string &op, std::unique_ptr<Expr> a,
                               std::unique_ptr<Expr> b) {
    auto expr = node(Expr::Kind::Binary);
    expr->name = op;
    expr->args.push_back(std::move(a));
    expr->args.push_back(std::move(b));
    return expr;
  }
  void setError(const std::string &message) {
    if (error_.empty()) {
      error_ = message;
    }
  }

  /// Nesting bound: a hostile template of a million '(' would otherwise
  /// overflow the stack.
  static constexpr int kMaxDepth = 200;

  std::unique_ptr<Expr> conditional() {
    if (++depth_ > kMaxDepth) {
      setError("expressions nest deeper than " + std::to_string(kMaxDepth));
      --depth_;
      return node(Expr::Kind::Literal);
    }
    std::unique_ptr<Expr> value = conditionalBody();
    --depth_;
    return value;
  }
  std::unique_ptr<Expr> conditionalBody() {
    std::unique_ptr<Expr> value = orExpr();
    if (peek().kind == Token::Kind::Name && peek().text == "if") {
      ++position_;
      auto expr = node(Expr::Kind::Conditional);
      expr->args.push_back(std::move(value));
      expr->args.push_back(orExpr());
      expr->args.push_back(acceptName("else") ? conditional() : nullptr);
      return expr;
    }
    return value;
  }
  std::unique_ptr<Expr> orExpr() {
    std::unique_ptr<Expr> left = andExpr();
    while (acceptName("or")) {
      left = binary("or", std::move(left), andExpr());
    }
    return left;
  }
  std::unique_ptr<Expr> andExpr() {
    std::unique_ptr<Expr> left = notExpr();
    while (acceptName("and")) {
      left = binary("and", std::move(left), notExpr());
    }
    return left;
  }
  std::unique_ptr<Expr> notExpr() {
    if (peek().kind == Token::Kind::Name && peek().text == "not" &&
        depth_ + 1 > kMaxDepth) {
      setError("expressions nest deeper than " + std::to_string(kMaxDepth));
      return node(Expr::Kind::Literal);
    }
    if (acceptName("not")) {
      ++depth_;
      auto expr = node(Expr::Kind::Unary);
      expr->name = "not";
      expr->args.push_back(notExpr());
      --depth_;
      return expr;
    }
    return compare();
  }
  std::unique_ptr<Expr> compare() {
    std::unique_ptr<Expr> left = concat();
    while (true) {
      static const char *ops[] = {"==", "!=", "<=", ">=", "<", ">"};
      bool matched = false;
      for (const char *op : ops) {
        if (acceptOp(op)) {
          left = binary(op, std::move(left), concat());
          matched = true;
          break;
        }
      }
      if (matched) {
        continue;
      }
      if (acceptName("in")) {
        left = binary("in", std::move(left), concat());
        continue;
      }
      if (peek().kind == Token::Kind::Name && peek().text == "not" &&
          peek(1).kind == Token::Kind::Name && peek(1).text == "in") {
        position_ += 2;
        left = binary("not in", std::move(left), concat());
        continue;
      }
      return left;
    }
  }
  std::unique_ptr<Expr> concat() {
    std::unique_ptr<Expr> left = sum();
    while (acceptOp("~")) {
      left = binary("~", std::move(left), sum());
    }
    return left;
  }
  std::unique_ptr<Expr> sum() {
    std::unique_ptr<Expr> left = product();
    while (true) {
      if (acceptOp("+")) {
        left = binary("+", std::move(left), product());
      } else if (acceptOp("-")) {
        left = binary("-", std::move(left), product());
      } else {
        return left;
      }
    }
  }
  std::unique_ptr<Expr> product() {
    std::unique_ptr<Expr> left = unary();
    while (true) {
      bool matched = false;
      for (const char *op : {"//", "*", "/", "%"}) {
        if (acceptOp(op)) {
          left = binary(op, std::move(left), unary());
          matched = true;
          break;
        }
      }
      if (!matched) {
        return left;
      }
    }
  }
  std::unique_ptr<Expr> unary() {
    if (acceptOp("-")) {
      if (++depth_ > kMaxDepth) {
        setError("expressions nest deeper than " + std::to_string(kMaxDepth));
        --depth_;
        return node(Expr::Kind::Literal);
      }
      auto expr = node(Expr::Kind::Unary);
      expr->name = "-";
      expr->args.push_back(unary());
      --depth_;
      return expr;
    }
    acceptOp("+");
    return filtered(postfix(primary()));
  }
  /// `value | filter(args)` and `value is [not] test`.
  std::unique_ptr<Expr> filtered(std::unique_ptr<Expr> value) {
    while (error_.empty()) {
      if (acceptOp("|")) {
        std::optional<std::string> name = takeName();
        if (!name) {
          setError("expected a filter name after '|'");
          return value;
        }
        auto expr = node(Expr::Kind::Filter);
        expr->name = *name;
        expr->args.push_back(std::move(value));
        if (acceptOp("(")) {
          callArguments(*expr);
        }
        value = postfix(std::move(expr));
        continue;
      }
      if (peek().kind == Token::Kind::Name && peek().text == "is") {
        ++position_;
        auto expr = node(Expr::Kind::Test);
        expr->negated = acceptName("not");
        std::optional<std::string> name = takeName();
        if (!name) {
          setError("expected a test name after 'is'");
          return value;
        }
        expr->name = *name;
        expr->args.push_back(std::move(value));
        if (acceptOp("(")) {
          callArguments(*expr);
        }
        value = std::move(expr);
        continue;
      }
      return value;
    }
    return value;
  }
  void callArguments(Expr &call) {
    while (!acceptOp(")")) {
      if (atEnd() || !error_.empty()) {
        setError("a call's '(' is not closed");
        return;
      }
      if (peek().kind == Token::Kind::Name && peek(1).kind == Token::Kind::Op &&
          peek(1).text == "=") {
        std::string key = tokens_[position_].text;
        position_ += 2;
        call.keywords.emplace_back(key, conditional());
      } else {
        call.args.push_back(conditional());
      }
      if (!acceptOp(",") &&
          !(peek().kind == Token::Kind::Op && peek().text == ")")) {
        setError("expected ',' or ')' in a call");
        return;
      }
    }
  }
  std::unique_ptr<Expr> postfix(std::unique_ptr<Expr> value) {
    while (error_.empty()) {
      if (acceptOp(".")) {
        std::optional<std::string> name = takeName();
        if (!name) {
          setError("expected a name after '.'");
          return value;
        }
        auto expr = node(Expr::Kind::Attr);
        expr->name = *name;
        expr->args.push_back(std::move(value));
        value = std::move(expr);
      } else if (acceptOp("[")) {
        // An index, or a slice [start:stop:step].
        std::unique_ptr<Expr> parts[3];
        int colons = 0;
        while (!acceptOp("]")) {
          if (atEnd() || !error_.empty()) {
            setError("a '[' is not closed");
            return value;
          }
          if (acceptOp(":")) {
            if (++colons > 2) {
              setError("a slice has at most two ':'");
              return value;
            }
            continue;
          }
          parts[colons] = conditional();
        }
        auto expr = node(colons ? Expr::Kind::Slice : Expr::Kind::Item);
        expr->args.push_back(std::move(value));
        if (colons) {
          for (auto &part : parts) {
            expr->args.push_back(std::move(part));
          }
        } else if (parts[0]) {
          expr->args.push_back(std::move(parts[0]));
        } else {
          setError("an empty '[]'");
          return expr;
        }
        value = std::move(expr);
      } else if (acceptOp("(")) {
        auto expr = node(Expr::Kind::Call);
        expr->args.push_back(std::move(value));
        callArguments(*expr);
        value = std::move(expr);
      } else {
        return value;
      }
    }
    return value;
  }
  std::unique_ptr<Expr> primary() {
    const Token token = peek();
    ++position_;
    auto literal = [&](Value v) {
      auto expr = node(Expr::Kind::Literal);
      expr->literal = std::move(v);
      return expr;
    };
    switch (token.kind) {
    case Token::Kind::String: {
      std::string text = token.text;
      while (peek().kind == Token::Kind::String) { // adjacent literals join
        text += tokens_[position_++].text;
      }
      return literal(Value::of(text));
    }
    case Token::Kind::Int: {
      int64_t value = 0;
      std::from_chars(token.text.data(), token.text.data() + token.text.size(),
                      value);
      return literal(Value::of(value));
    }
    case Token::Kind::Float:
      return literal(Value::of(std::strtod(token.text.c_str(), nullptr)));
    case Token::Kind::Name:
      if (token.text == "true" || token.text == "True") {
        return literal(Value::of(true));
      }
      if (token.text == "false" || token.text == "False") {
        return literal(Value::of(false));
      }
      if (token.text == "none" || token.text == "None") {
        return literal(Value::none());
      }
      {
        auto expr = node(Expr::Kind::Name);
        expr->name = token.text;
        return expr;
      }
    case Token::Kind::Op:
      if (token.text == "(") {
        std::unique_ptr<Expr> inner = conditional();
        if (!acceptOp(")")) {
          setError("a '(' is not closed");
        }
        return inner;
      }
      if (token.text == "[") {
        auto expr = node(Expr::Kind::ListLiteral);
        while (!acceptOp("]")) {
          if (atEnd() || !error_.empty()) {
            setError("a list's '[' is not closed");
            return expr;
          }
          expr->args.push_back(conditional());
          acceptOp(",");
        }
        return expr;
      }
      if (token.text == "{") {
        auto expr = node(Expr::Kind::DictLiteral);
        while (!acceptOp("}")) {
          if (atEnd() || !error_.empty()) {
            setError("a dict's '{' is not closed");
            return expr;
          }
          expr->args.push_back(conditional());
          if (!acceptOp(":")) {
            setError("expected ':' in a dict literal");
            return expr;
          }
          expr->args.push_back(conditional());
          acceptOp(",");
        }
        return expr;
      }
      break;
    case Token::Kind::End:
      setError("an expression ends too early");
      return literal(Value());
    }
    setError("unexpected '" + token.text + "'");
    return literal(Value());
  }

  std::vector<Token> tokens_;
  size_t position_ = 0;
  int line_;
  int depth_ = 0;
  std::string error_;
};

} // namespace

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

struct ChatTemplate::Node {
  enum class Kind { Text, Output, If, For, Set } kind;
  int line = 0;
  std::string text;
  std::unique_ptr<Expr> expr; // Output, For's iterable, Set's value
  /// If: (condition, body) per branch; the else branch has no condition.
  std::vector<
      std::pair<std::unique_ptr<Expr>, std::vector<std::unique_ptr<Node>>>>
      branches;
  std::vector<std::string> targets; // For's names; Set's name or ns, attr
  std::vector<std::unique_ptr<Node>> body, elseBody;
};

namespace {

using Node = ChatTemplate::Node;

/// A piece of the source: text or a tag's inside.
struct Segment {
  enum class Kind { Text, Output, Statement, Comment } kind;
  std::string content;
  int line;
};

/// Cuts `source` into segments, applying `-` and trim_blocks/lstrip_blocks.
StatusOr<std::vector<Segment>> segment(const std::string &source) {
  std::vector<Segment> segments;
  size_t i = 0;
  int line = 1;
  bool trimNextText = false;    // a `-` closed the tag before
  bool trimNextNewline = false; // trim_blocks after a block tag
  auto countLines = [&](size_t from, size_t to) {
    line += static_cast<int>(
        std::count(source.begin() + from, source.begin() + to, '\n'));
  };
  while (i < source.size()) {
    size_t open = source.find('{', i);
    while (open != std::string::npos && open + 1 < source.size() &&
           source[open + 1] != '{' && source[open + 1] != '%' &&
           source[open + 1] != '#') {
      open = source.find('{', open + 1);
    }
    if (open != std::string::npos && open + 1 >= source.size()) {
      open = std::string::npos; // a '{' that ends the text
    }
    std::string text = source.substr(
        i, open == std::string::npos ? std::string::npos : open - i);
    int textLine = line;
    countLines(i, open == std::string::npos ? source.size() : open);
    if (trimNextText) {
      text.erase(0, text.find_first_not_of(" \t\r\n"));
      if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
        text.clear();
      }
    } else if (trimNextNewline) {
      if (text.rfind("\r\n", 0) == 0) {
        text.erase(0, 2);
      } else if (!text.empty() && text[0] == '\n') {
        text.erase(0, 1);
      }
    }
    trimNextText = trimNextNewline = false;
    if (open == std::string::npos) {
      segments.push_back({Segment::Kind::Text, text, textLine});
      break;
    }
    char kind = source[open + 1];
    const char *closer = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    size_t close = source.find(closer, open + 2);
    if (close == std::string::npos) {
      return Status::error(StatusCode::InvalidArgument,
                           "chat template line " + std::to_string(line) +
                               ": a '{" + kind + "' is not closed");
    }
    std::string inside = source.substr(open + 2, close - open - 2);
    bool leftTrim = !inside.empty() && inside.front() == '-';
    bool keepLeft = !inside.empty() && inside.front() == '+';
    if (leftTrim || keepLeft) {
      inside.erase(0, 1);
    }
    // After the left marker: "{%-%}" has one '-', not two.
    bool rightTrim = !inside.empty() && inside.back() == '-';
    if (rightTrim) {
      inside.pop_back();
    }
    bool block = kind != '{';
    if (leftTrim) {
      size_t keep = text.find_last_not_of(" \t\r\n");
      text.erase(keep == std::string::npos ? 0 : keep + 1);
    } else if (block && !keepLeft) {
      // lstrip_blocks: the spaces and tabs before a block tag that starts
      // its line (in the source) go.
      size_t before = open;
      while (before > 0 &&
             (source[before - 1] == ' ' || source[before - 1] == '\t')) {
        --before;
      }
      if (before == 0 || source[before - 1] == '\n') {
        size_t blanks = open - before;
        text.erase(text.size() - std::min(blanks, text.size()));
      }
    }
    segments.push_back({Segment::Kind::Text, text, textLine});
    segments.push_back({kind == '{'   ? Segment::Kind::Output
                        : kind == '%' ? Segment::Kind::Statement
                                      : Segment::Kind::Comment,
                        inside, line});
    countLines(open, close + 2);
    i = close + 2;
    trimNextText = rightTrim;
    trimNextNewline = block && !rightTrim;
  }
  return segments;
}

class TemplateParser {
public:
  explicit TemplateParser(std::vector<Segment> segments)
      : segments_(std::move(segments)) {}

  /// Parses nodes until a statement whose keyword is in `ends` (left
  /// unconsumed), or the end when `ends` is empty.
  Status parseBlock(std::vector<std::unique_ptr<Node>> &out,
                    const std::vector<std::string> &ends) {
    while (position_ < segments_.size()) {
      const Segment &segment = segments_[position_];
      switch (segment.kind) {
      case Segment::Kind::Text:
        if (!segment.content.empty()) {
          auto node = std::make_unique<Node>();
          node->kind = Node::Kind::Text;
          node->text = segment.content;
          out.push_back(std::move(node));
        }
        ++position_;
        break;
      case Segment::Kind::Comment:
        ++position_;
        break;
      case Segment::Kind::Output: {
        StatusOr<std::vector<Token>> tokens =
            tokenize(segment.content, segment.line);
        if (!tokens) {
          return tokens.status();
        }
        ExprParser parser(tokens.take(), segment.line);
        StatusOr<std::unique_ptr<Expr>> expr = parser.parseExpression();
        if (!expr) {
          return expr.status();
        }
        if (!parser.atEnd()) {
          return parser.fail("unexpected '" + parser.peek().text +
                             "' in {{ }}");
        }
        auto node = std::make_unique<Node>();
        node->kind = Node::Kind::Output;
        node->line = segment.line;
        node->expr = expr.take();
        out.push_back(std::move(node));
        ++position_;
        break;
      }
      case Segment::Kind::Statement: {
        std::string keyword = firstWord(segment.content);
        if (std::find(ends.begin(), ends.end(), keyword) != ends.end()) {
          return Status::ok();
        }
        MFRT_RETURN_IF_ERROR(parseStatement(out));
        break;
      }
      }
    }
    if (!ends.empty()) {
      return Status::error(
          StatusCode::InvalidArgument,
          "chat template: a block is not closed (expected {% " + ends.back() +
              " %})");
    }
    return Status::ok();
  }

private:
  static std::string firstWord(const std::string &content) {
    size_t start = content.find_first_not_of(" \t\r\n");
    if (start == std::string::npos) {
      return "";
    }
    size_t end = start;
    while (end < content.size() &&
           (std::isalnum(static_cast<unsigned char>(content[end])) ||
            content[end] == '_')) {
      ++end;
    }
    return content.substr(start, end - start);
  }

  Status parseStatement(std::vector<std::unique_ptr<Node>> &out) {
    const Segment segment = segments_[position_++];
    if (depth_ >= 200) {
      return Status::error(StatusCode::InvalidArgument,
                           "chat template line " +
                               std::to_string(segment.line) +
                               ": blocks nest deeper than 200");
    }
    ++depth_;
    Status status = parseStatementAt(segment, out);
    --depth_;
    return status;
  }

  Status parseStatementAt(const Segment &segment,
                          std::vector<std::unique_ptr<Node>> &out) {
    StatusOr<std::vector<Token>> tokens =
        tokenize(segment.content, segment.line);
    if (!tokens) {
      return tokens.status();
    }
    ExprParser parser(tokens.take(), segment.line);
    std::optional<std::string> word = parser.takeName();
    if (!word) {
      return parser.fail("expected a statement in {% %}");
    }
    std::string keyword = *word;
    auto node = std::make_unique<Node>();
    node->line = segment.line;
    auto expression = [&]() -> StatusOr<std::unique_ptr<Expr>> {
      return parser.parseExpression();
    };
    auto expectEnd = [&]() -> Status {
      if (!parser.error().empty()) {
        return parser.fail(parser.error());
      }
      if (!parser.atEnd()) {
        return parser.fail("unexpected '" + parser.peek().text + "' in {% " +
                           keyword + " %}");
      }
      return Status::ok();
    };
    if (keyword == "if") {
      node->kind = Node::Kind::If;
      StatusOr<std::unique_ptr<Expr>> condition = expression();
      if (!condition) {
        return condition.status();
      }
      MFRT_RETURN_IF_ERROR(expectEnd());
      std::unique_ptr<Expr> current = condition.take();
      bool sawElse = false;
      while (true) {
        std::vector<std::unique_ptr<Node>> body;
        MFRT_RETURN_IF_ERROR(parseBlock(body, {"elif", "else", "endif"}));
        node->branches.emplace_back(std::move(current), std::move(body));
        const Segment &end = segments_[position_++];
        StatusOr<std::vector<Token>> endTokens =
            tokenize(end.content, end.line);
        if (!endTokens) {
          return endTokens.status();
        }
        ExprParser endParser(endTokens.take(), end.line);
        std::string word = endParser.takeName().value_or("");
        if (word == "endif") {
          break;
        }
        if (sawElse) {
          return endParser.fail("{% " + word + " %} after {% else %}");
        }
        if (word == "else") {
          sawElse = true;
          current = nullptr;
          continue;
        }
        StatusOr<std::unique_ptr<Expr>> next = endParser.parseExpression();
        if (!next) {
          return next.status();
        }
        current = next.take();
      }
    } else if (keyword == "for") {
      node->kind = Node::Kind::For;
      do {
        std::optional<std::string> name = parser.takeName();
        if (!name) {
          return parser.fail("expected a loop variable after 'for'");
        }
        node->targets.push_back(*name);
      } while (parser.acceptOp(","));
      if (!parser.acceptName("in")) {
        return parser.fail("expected 'in' in {% for %}");
      }
      StatusOr<std::unique_ptr<Expr>> iterable = expression();
      if (!iterable) {
        return iterable.status();
      }
      node->expr = iterable.take();
      MFRT_RETURN_IF_ERROR(expectEnd());
      MFRT_RETURN_IF_ERROR(parseBlock(node->body, {"else", "endfor"}));
      if (firstWord(segments_[position_++].content) == "else") {
        MFRT_RETURN_IF_ERROR(parseBlock(node->elseBody, {"endfor"}));
        ++position_;
      }
    } else if (keyword == "set") {
      node->kind = Node::Kind::Set;
      std::optional<std::string> name = parser.takeName();
      if (!name) {
        return parser.fail("expected a name after 'set'");
      }
      node->targets.push_back(*name);
      if (parser.acceptOp(".")) {
        std::optional<std::string> attribute = parser.takeName();
        if (!attribute) {
          return parser.fail("expected an attribute after '.'");
        }
        node->targets.push_back(*attribute);
      }
      if (!parser.acceptOp("=")) {
        return parser.fail(
            "{% set %} blocks are not supported; use {% set x = ... %}");
      }
      StatusOr<std::unique_ptr<Expr>> value = expression();
      if (!value) {
        return value.status();
      }
      node->expr = value.take();
      MFRT_RETURN_IF_ERROR(expectEnd());
    } else {
      return parser.fail("{% " + keyword +
                         " %} is not supported (mfc renders if, for and set)");
    }
    out.push_back(std::move(node));
    return Status::ok();
  }

  std::vector<Segment> segments_;
  size_t position_ = 0;
  int depth_ = 0;
};

//===----------------------------------------------------------------------===//
// Rendering
//===----------------------------------------------------------------------===//

/// A render's bounds: real templates take hundreds of steps and produce
/// kilobytes per message; a hostile one (40 nested loops, a string doubled
/// in a loop) would run for ever or fill memory.
constexpr int64_t kMaxRenderSteps = int64_t(1) << 22;
constexpr size_t kMaxRenderedBytes = size_t(16) << 20;

class Renderer {
public:
  explicit Renderer(std::map<std::string, Value> globals) {
    scopes_.push_back(std::move(globals));
  }

  Status run(const std::vector<std::unique_ptr<Node>> &nodes) {
    for (const auto &node : nodes) {
      MFRT_RETURN_IF_ERROR(exec(*node));
    }
    return Status::ok();
  }
  std::string &output() { return output_; }

private:
  Status fail(int line, const std::string &message) const {
    return Status::error(StatusCode::InvalidArgument, "chat template line " +
                                                          std::to_string(line) +
                                                          ": " + message);
  }

  Status append(int line, const std::string &text) {
    if (output_.size() + text.size() > kMaxRenderedBytes) {
      return tooBig(line);
    }
    output_ += text;
    return Status::ok();
  }

  /// Counts a statement, text piece or loop iteration against the bound.
  Status step(int line) {
    if (++steps_ > kMaxRenderSteps) {
      return fail(line, "the template ran more than " +
                            std::to_string(kMaxRenderSteps) +
                            " steps (a loop without end?)");
    }
    return Status::ok();
  }

  Status tooBig(int line) const {
    return fail(line, "the rendered text (or a string in it) would exceed " +
                          std::to_string(kMaxRenderedBytes >> 20) + " MiB");
  }

  Value lookup(const std::string &name) const {
    for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope) {
      auto found = scope->find(name);
      if (found != scope->end()) {
        return found->second;
      }
    }
    return Value();
  }

  Status exec(const Node &node) {
    if (node.line > 0) {
      line_ = node.line; // text nodes have none: the last statement's
    }
    MFRT_RETURN_IF_ERROR(step(line_));
    switch (node.kind) {
    case Node::Kind::Text:
      return append(line_, node.text);
    case Node::Kind::Output: {
      StatusOr<Value> value = eval(*node.expr);
      if (!value) {
        return value.status();
      }
      return append(node.line, str(*value));
    }
    case Node::Kind::If:
      for (const auto &[condition, body] : node.branches) {
        bool taken = true;
        if (condition) {
          StatusOr<Value> value = eval(*condition);
          if (!value) {
            return value.status();
          }
          taken = truthy(*value);
        }
        if (taken) {
          return run(body);
        }
      }
      return Status::ok();
    case Node::Kind::Set: {
      StatusOr<Value> value = eval(*node.expr);
      if (!value) {
        return value.status();
      }
      if (node.targets.size() == 1) {
        scopes_.back()[node.targets[0]] = value.take();
        return Status::ok();
      }
      Value object = lookup(node.targets[0]);
      if (object.kind != Value::Kind::Map) {
        return fail(node.line, "cannot set '" + node.targets[1] + "' on '" +
                                   node.targets[0] + "', which is " +
                                   kindName(object));
      }
      object.set(node.targets[1], value.take());
      return Status::ok();
    }
    case Node::Kind::For:
      return execFor(node);
    }
    return Status::ok();
  }

  Status execFor(const Node &node) {
    StatusOr<Value> iterable = eval(*node.expr);
    if (!iterable) {
      return iterable.status();
    }
    List items;
    if (iterable->kind == Value::Kind::List) {
      items = *iterable->list;
    } else if (iterable->kind == Value::Kind::Map) {
      for (const auto &[key, value] : *iterable->map) {
        items.push_back(Value::of(key));
      }
    } else if (iterable->kind == Value::Kind::String) {
      for (std::string &c : characters(iterable->text)) {
        items.push_back(Value::of(std::move(c)));
      }
    } else if (iterable->kind != Value::Kind::Undefined &&
               iterable->kind != Value::Kind::None) {
      return fail(node.line,
                  std::string("cannot loop over ") + kindName(*iterable));
    }
    if (items.empty()) {
      return run(node.elseBody);
    }
    int64_t length = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < length; ++i) {
      MFRT_RETURN_IF_ERROR(step(node.line));
      std::map<std::string, Value> scope;
      if (node.targets.size() == 1) {
        scope[node.targets[0]] = items[i];
      } else {
        const Value &item = items[i];
        if (item.kind != Value::Kind::List ||
            item.list->size() != node.targets.size()) {
          return fail(node.line, "cannot unpack " +
                                     std::string(kindName(item)) + " into " +
                                     std::to_string(node.targets.size()) +
                                     " loop variables");
        }
        for (size_t t = 0; t < node.targets.size(); ++t) {
          scope[node.targets[t]] = (*item.list)[t];
        }
      }
      scope["loop"] = Value::ofMap({{"index", Value::of(i + 1)},
                                    {"index0", Value::of(i)},
                                    {"revindex", Value::of(length - i)},
                                    {"revindex0", Value::of(length - i - 1)},
                                    {"first", Value::of(i == 0)},
                                    {"last", Value::of(i + 1 == length)},
                                    {"length", Value::of(length)}});
      scopes_.push_back(std::move(scope));
      Status status = run(node.body);
      scopes_.pop_back();
      MFRT_RETURN_IF_ERROR(status);
    }
    return Status::ok();
  }

  /// An expression's value; a string or list beyond the render's bound is
  /// an error (the operations that grow them check before they build).
  StatusOr<Value> eval(const Expr &expr) {
    StatusOr<Value> value = evalUnbounded(expr);
    if (value && ((value->kind == Value::Kind::String &&
                   value->text.size() > kMaxRenderedBytes) ||
                  (value->kind == Value::Kind::List &&
                   value->list->size() > kMaxRenderedBytes))) {
      return tooBig(expr.line);
    }
    return value;
  }

  StatusOr<Value> evalUnbounded(const Expr &expr) {
    auto child = [&](size_t i) { return eval(*expr.args[i]); };
    switch (expr.kind) {
    case Expr::Kind::Literal:
      return expr.literal;
    case Expr::Kind::Name:
      return lookup(expr.name);
    case Expr::Kind::ListLiteral: {
      List items;
      for (size_t i = 0; i < expr.args.size(); ++i) {
        StatusOr<Value> item = child(i);
        if (!item) {
          return item.status();
        }
        items.push_back(item.take());
      }
      return Value::ofList(std::move(items));
    }
    case Expr::Kind::DictLiteral: {
      Value map = Value::ofMap({});
      for (size_t i = 0; i + 1 < expr.args.size(); i += 2) {
        StatusOr<Value> key = child(i), value = child(i + 1);
        if (!key || !value) {
          return (!key ? key : value).status();
        }
        map.set(str(*key), value.take());
      }
      return map;
    }
    case Expr::Kind::Attr: {
      StatusOr<Value> object = child(0);
      if (!object) {
        return object.status();
      }
      return attribute(expr, *object, expr.name);
    }
    case Expr::Kind::Item: {
      StatusOr<Value> object = child(0), index = child(1);
      if (!object || !index) {
        return (!object ? object : index).status();
      }
      return item(expr, *object, *index);
    }
    case Expr::Kind::Slice:
      return slice(expr);
    case Expr::Kind::Call:
      return call(expr);
    case Expr::Kind::Filter:
      return filter(expr);
    case Expr::Kind::Test:
      return test(expr);
    case Expr::Kind::Unary: {
      StatusOr<Value> operand = child(0);
      if (!operand) {
        return operand.status();
      }
      if (expr.name == "not") {
        return Value::of(!truthy(*operand));
      }
      if (operand->kind == Value::Kind::Int) {
        return Value::of(-operand->integer);
      }
      if (operand->kind == Value::Kind::Float) {
        return Value::of(-operand->number);
      }
      return fail(expr.line,
                  std::string("cannot negate ") + kindName(*operand));
    }
    case Expr::Kind::Conditional: {
      StatusOr<Value> condition = child(1);
      if (!condition) {
        return condition.status();
      }
      if (truthy(*condition)) {
        return child(0);
      }
      return expr.args[2] ? child(2) : StatusOr<Value>(Value());
    }
    case Expr::Kind::Binary:
      return binary(expr);
    }
    return Value();
  }

  StatusOr<Value> attribute(const Expr &expr, const Value &object,
                            const std::string &name) {
    if (object.kind == Value::Kind::Map) {
      const Value *found = object.find(name);
      return found ? *found : Value();
    }
    if (object.kind == Value::Kind::Undefined) {
      return fail(expr.line, "'" + name + "' of an undefined value");
    }
    return Value(); // a missing attribute is undefined, as in Jinja
  }

  StatusOr<Value> item(const Expr &expr, const Value &object,
                       const Value &index) {
    if (object.kind == Value::Kind::Map) {
      const Value *found = object.find(str(index));
      return found ? *found : Value();
    }
    if ((object.kind == Value::Kind::List ||
         object.kind == Value::Kind::String) &&
        index.kind == Value::Kind::Int) {
      std::vector<std::string> chars;
      if (object.kind == Value::Kind::String) {
        chars = characters(object.text);
      }
      int64_t size = object.kind == Value::Kind::List
                         ? static_cast<int64_t>(object.list->size())
                         : static_cast<int64_t>(chars.size());
      int64_t at = index.integer < 0 ? index.integer + size : index.integer;
      if (at < 0 || at >= size) {
        return Value(); // Jinja: undefined
      }
      return object.kind == Value::Kind::List ? (*object.list)[at]
                                              : Value::of(chars[at]);
    }
    if (object.kind == Value::Kind::Undefined) {
      return fail(expr.line, "an item of an undefined value");
    }
    return fail(expr.line, std::string("cannot index ") + kindName(object) +
                               " with " + kindName(index));
  }

  StatusOr<Value> slice(const Expr &expr) {
    StatusOr<Value> object = eval(*expr.args[0]);
    if (!object) {
      return object.status();
    }
    int64_t bounds[3] = {0, 0, 1};
    bool given[3] = {false, false, false};
    for (int i = 0; i < 3; ++i) {
      if (!expr.args[1 + i]) {
        continue;
      }
      StatusOr<Value> value = eval(*expr.args[1 + i]);
      if (!value) {
        return value.status();
      }
      if (value->kind == Value::Kind::None) {
        continue;
      }
      if (value->kind != Value::Kind::Int) {
        return fail(expr.line, "slice bounds must be integers");
      }
      bounds[i] = value->integer;
      given[i] = true;
    }
    int64_t step = bounds[2];
    if (step == 0) {
      return fail(expr.line, "a slice step cannot be zero");
    }
    bool isList = object->kind == Value::Kind::List;
    if (!isList && object->kind != Value::Kind::String) {
      return fail(expr.line, std::string("cannot slice ") + kindName(*object));
    }
    std::vector<std::string> chars;
    if (!isList) {
      chars = characters(object->text);
    }
    int64_t size = isList ? static_cast<int64_t>(object->list->size())
                          : static_cast<int64_t>(chars.size());
    // Python's slice.indices().
    auto clamp = [&](int64_t value, bool isGiven, int64_t fallback) {
      if (!isGiven) {
        return fallback;
      }
      if (value < 0) {
        value += size;
      }
      if (step > 0) {
        return std::clamp<int64_t>(value, 0, size);
      }
      return std::clamp<int64_t>(value, -1, size - 1);
    };
    int64_t start = clamp(bounds[0], given[0], step > 0 ? 0 : size - 1);
    int64_t stop = clamp(bounds[1], given[1], step > 0 ? size : -1);
    List items;
    std::string text;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (isList) {
        items.push_back((*object->list)[i]);
      } else {
        text += chars[i];
      }
    }
    return isList ? Value::ofList(std::move(items)) : Value::of(text);
  }

  StatusOr<std::vector<Value>> arguments(const Expr &expr, size_t first) {
    std::vector<Value> values;
    for (size_t i = first; i < expr.args.size(); ++i) {
      StatusOr<Value> value = eval(*expr.args[i]);
      if (!value) {
        return value.status();
      }
      values.push_back(value.take());
    }
    return values;
  }

  StatusOr<Value> call(const Expr &expr) {
    const Expr &callee = *expr.args[0];
    StatusOr<std::vector<Value>> args = arguments(expr, 1);
    if (!args) {
      return args.status();
    }
    if (callee.kind == Expr::Kind::Name) {
      if (callee.name == "raise_exception") {
        return fail(expr.line,
                    "the template raised: " +
                        (args->empty() ? std::string() : str((*args)[0])));
      }
      if (callee.name == "namespace") {
        Value ns = Value::ofMap({});
        for (const auto &[key, valueExpr] : expr.keywords) {
          StatusOr<Value> value = eval(*valueExpr);
          if (!value) {
            return value.status();
          }
          ns.set(key, value.take());
        }
        return ns;
      }
      return fail(expr.line, "'" + callee.name +
                                 "' is not a function mfc knows "
                                 "(raise_exception, namespace)");
    }
    if (callee.kind != Expr::Kind::Attr) {
      return fail(expr.line,
                  "only methods and raise_exception/namespace can be called");
    }
    StatusOr<Value> object = eval(*callee.args[0]);
    if (!object) {
      return object.status();
    }
    return method(expr, *object, callee.name, *args);
  }

  StatusOr<Value> method(const Expr &expr, const Value &object,
                         const std::string &name,
                         const std::vector<Value> &args) {
    auto stringArg = [&](size_t i, const std::string &fallback) -> std::string {
      return i < args.size() && args[i].kind == Value::Kind::String
                 ? args[i].text
                 : fallback;
    };
    if (object.kind == Value::Kind::String) {
      const std::string &s = object.text;
      if (name == "startswith" || name == "endswith") {
        std::string affix = stringArg(0, "");
        bool yes =
            s.size() >= affix.size() &&
            (name == "startswith" ? s.compare(0, affix.size(), affix) == 0
                                  : s.compare(s.size() - affix.size(),
                                              affix.size(), affix) == 0);
        return Value::of(yes);
      }
      if (name == "strip" || name == "lstrip" || name == "rstrip") {
        std::string chars = args.empty() || args[0].kind == Value::Kind::None
                                ? std::string(" \t\n\r\v\f")
                                : stringArg(0, "");
        size_t begin = name == "rstrip" ? 0 : s.find_first_not_of(chars);
        if (begin == std::string::npos) {
          return Value::of(std::string());
        }
        size_t end =
            name == "lstrip" ? s.size() : s.find_last_not_of(chars) + 1;
        return Value::of(s.substr(begin, end - begin));
      }
      if (name == "split") {
        List parts;
        if (args.empty() || args[0].kind == Value::Kind::None) {
          size_t i = 0;
          while (true) {
            size_t begin = s.find_first_not_of(" \t\n\r\v\f", i);
            if (begin == std::string::npos) {
              break;
            }
            size_t end = s.find_first_of(" \t\n\r\v\f", begin);
            parts.push_back(Value::of(s.substr(begin, end == std::string::npos
                                                          ? std::string::npos
                                                          : end - begin)));
            if (end == std::string::npos) {
              break;
            }
            i = end;
          }
          return Value::ofList(std::move(parts));
        }
        std::string separator = stringArg(0, "");
        if (separator.empty()) {
          return fail(expr.line, "split() with an empty separator");
        }
        size_t start = 0;
        for (size_t at; (at = s.find(separator, start)) != std::string::npos;
             start = at + separator.size()) {
          parts.push_back(Value::of(s.substr(start, at - start)));
        }
        parts.push_back(Value::of(s.substr(start)));
        return Value::ofList(std::move(parts));
      }
      if (name == "replace") {
        std::string from = stringArg(0, ""), to = stringArg(1, "");
        std::string out;
        if (from.empty()) {
          return object;
        }
        size_t start = 0;
        for (size_t at; (at = s.find(from, start)) != std::string::npos;
             start = at + from.size()) {
          if (out.size() + (at - start) + to.size() > kMaxRenderedBytes) {
            return tooBig(expr.line);
          }
          out += s.substr(start, at - start) + to;
        }
        return Value::of(out + s.substr(start));
      }
      if (name == "upper" || name == "lower") {
        std::string out = s;
        for (char &c : out) {
          c = static_cast<char>(
              name == "upper" ? std::toupper(static_cast<unsigned char>(c))
                              : std::tolower(static_cast<unsigned char>(c)));
        }
        return Value::of(out);
      }
    }
    if (object.kind == Value::Kind::Map) {
      if (name == "items" || name == "keys" || name == "values") {
        List out;
        for (const auto &[key, value] : *object.map) {
          out.push_back(name == "items" ? Value::ofList({Value::of(key), value})
                        : name == "keys" ? Value::of(key)
                                         : value);
        }
        return Value::ofList(std::move(out));
      }
      if (name == "get") {
        const Value *found = args.empty() ? nullptr : object.find(str(args[0]));
        return found ? *found : args.size() > 1 ? args[1] : Value::none();
      }
    }
    return fail(expr.line, "method '" + name + "' of " + kindName(object) +
                               " is not supported");
  }

  StatusOr<Value> filter(const Expr &expr) {
    StatusOr<Value> operand = eval(*expr.args[0]);
    if (!operand) {
      return operand.status();
    }
    StatusOr<std::vector<Value>> args = arguments(expr, 1);
    if (!args) {
      return args.status();
    }
    const Value &v = *operand;
    const std::string &name = expr.name;
    if (name == "trim") {
      std::string s = str(v);
      size_t begin = s.find_first_not_of(" \t\n\r\v\f");
      if (begin == std::string::npos) {
        return Value::of(std::string());
      }
      return Value::of(
          s.substr(begin, s.find_last_not_of(" \t\n\r\v\f") + 1 - begin));
    }
    if (name == "tojson") {
      std::string out;
      toJson(v, out);
      return Value::of(out);
    }
    if (name == "length" || name == "count") {
      switch (v.kind) {
      case Value::Kind::String:
        return Value::of(static_cast<int64_t>(characters(v.text).size()));
      case Value::Kind::List:
        return Value::of(static_cast<int64_t>(v.list->size()));
      case Value::Kind::Map:
        return Value::of(static_cast<int64_t>(v.map->size()));
      default:
        return fail(expr.line, std::string("length of ") + kindName(v));
      }
    }
    if (name == "string") {
      return Value::of(str(v));
    }
    if (name == "upper" || name == "lower") {
      return method(expr, Value::of(str(v)), name, {});
    }
    if (name == "first" || name == "last") {
      if (v.kind != Value::Kind::List || v.list->empty()) {
        return Value();
      }
      return name == "first" ? v.list->front() : v.list->back();
    }
    if (name == "join") {
      if (v.kind != Value::Kind::List) {
        return fail(expr.line, std::string("join of ") + kindName(v));
      }
      std::string separator = args->empty() ? "" : str((*args)[0]), out;
      for (size_t i = 0; i < v.list->size(); ++i) {
        out += (i ? separator : "") + str((*v.list)[i]);
        if (out.size() > kMaxRenderedBytes) {
          return tooBig(expr.line);
        }
      }
      return Value::of(out);
    }
    if (name == "default" || name == "d") {
      bool useDefault = v.kind == Value::Kind::Undefined ||
                        (args->size() > 1 && !truthy(v) && truthy((*args)[1]));
      return useDefault
                 ? (args->empty() ? Value::of(std::string()) : (*args)[0])
                 : v;
    }
    if (name == "list") {
      if (v.kind == Value::Kind::List) {
        return v;
      }
      return fail(expr.line, std::string("list of ") + kindName(v));
    }
    if (name == "reverse") {
      if (v.kind == Value::Kind::List) {
        List items(v.list->rbegin(), v.list->rend());
        return Value::ofList(std::move(items));
      }
      std::vector<std::string> chars = characters(str(v));
      std::string reversed;
      for (auto c = chars.rbegin(); c != chars.rend(); ++c) {
        reversed += *c;
      }
      return Value::of(reversed);
    }
    if (name == "items") {
      return method(expr, v, "items", {});
    }
    return fail(expr.line, "filter '" + name + "' is not supported");
  }

  StatusOr<Value> test(const Expr &expr) {
    StatusOr<Value> operand = eval(*expr.args[0]);
    if (!operand) {
      return operand.status();
    }
    const Value &v = *operand;
    std::optional<bool> result;
    const std::string &name = expr.name;
    if (name == "defined") {
      result = v.kind != Value::Kind::Undefined;
    } else if (name == "undefined") {
      result = v.kind == Value::Kind::Undefined;
    } else if (name == "none") {
      result = v.kind == Value::Kind::None;
    } else if (name == "string") {
      result = v.kind == Value::Kind::String;
    } else if (name == "number") {
      result = v.isNumber();
    } else if (name == "integer") {
      result = v.kind == Value::Kind::Int;
    } else if (name == "mapping") {
      result = v.kind == Value::Kind::Map;
    } else if (name == "sequence" || name == "iterable") {
      result = v.kind == Value::Kind::List || v.kind == Value::Kind::String ||
               (name == "iterable" && v.kind == Value::Kind::Map);
    } else if (name == "true" || name == "false") {
      result = v.kind == Value::Kind::Bool && v.boolean == (name == "true");
    } else if (name == "boolean") {
      result = v.kind == Value::Kind::Bool;
    }
    if (!result) {
      return fail(expr.line, "test '" + name + "' is not supported");
    }
    return Value::of(*result != expr.negated);
  }

  StatusOr<Value> binary(const Expr &expr) {
    const std::string &op = expr.name;
    StatusOr<Value> left = eval(*expr.args[0]);
    if (!left) {
      return left.status();
    }
    if (op == "and") {
      return truthy(*left) ? eval(*expr.args[1]) : left;
    }
    if (op == "or") {
      return truthy(*left) ? left : eval(*expr.args[1]);
    }
    StatusOr<Value> rightOr = eval(*expr.args[1]);
    if (!rightOr) {
      return rightOr.status();
    }
    const Value &a = *left, &b = *rightOr;
    if (op == "==" || op == "!=") {
      return Value::of(equal(a, b) == (op == "=="));
    }
    if (op == "in" || op == "not in") {
      bool found = false;
      if (b.kind == Value::Kind::String && a.kind == Value::Kind::String) {
        found = b.text.find(a.text) != std::string::npos;
      } else if (b.kind == Value::Kind::List) {
        found = std::any_of(b.list->begin(), b.list->end(),
                            [&](const Value &item) { return equal(item, a); });
      } else if (b.kind == Value::Kind::Map) {
        found = b.find(str(a)) != nullptr;
      } else {
        return fail(expr.line, std::string("'in' ") + kindName(b));
      }
      return Value::of(found == (op == "in"));
    }
    if (op == "~") {
      std::string left = str(a), right = str(b);
      if (left.size() + right.size() > kMaxRenderedBytes) {
        return tooBig(expr.line);
      }
      return Value::of(left + right);
    }
    if (a.kind == Value::Kind::Undefined || b.kind == Value::Kind::Undefined) {
      const Expr &undefined =
          *expr.args[a.kind == Value::Kind::Undefined ? 0 : 1];
      return fail(expr.line, undefined.kind == Expr::Kind::Name
                                 ? "'" + undefined.name + "' is undefined"
                                 : "'" + op + "' with an undefined value");
    }
    if (op == "+" && a.kind == Value::Kind::String &&
        b.kind == Value::Kind::String) {
      if (a.text.size() + b.text.size() > kMaxRenderedBytes) {
        return tooBig(expr.line);
      }
      return Value::of(a.text + b.text);
    }
    if (op == "+" && a.kind == Value::Kind::List &&
        b.kind == Value::Kind::List) {
      if (a.list->size() + b.list->size() > kMaxRenderedBytes) {
        return tooBig(expr.line);
      }
      List items = *a.list;
      items.insert(items.end(), b.list->begin(), b.list->end());
      return Value::ofList(std::move(items));
    }
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      int order;
      if (a.isNumber() && b.isNumber()) {
        order = a.asDouble() < b.asDouble()   ? -1
                : a.asDouble() > b.asDouble() ? 1
                                              : 0;
      } else if (a.kind == Value::Kind::String &&
                 b.kind == Value::Kind::String) {
        order = a.text.compare(b.text);
      } else {
        return fail(expr.line, std::string("cannot compare ") + kindName(a) +
                                   " and " + kindName(b));
      }
      bool result = op == "<"    ? order < 0
                    : op == ">"  ? order > 0
                    : op == "<=" ? order <= 0
                                 : order >= 0;
      return Value::of(result);
    }
    if (a.isNumber() && b.isNumber()) {
      bool integers = a.kind == Value::Kind::Int && b.kind == Value::Kind::Int;
      if (integers && op != "/") {
        int64_t x = a.integer, y = b.integer;
        if ((op == "//" || op == "%") && y == 0) {
          return fail(expr.line, "division by zero");
        }
        // Python's integers do not overflow; a 64-bit one would (undefined
        // behaviour in C++): an error, not a wrapped number.
        int64_t result = 0;
        bool overflow = op == "+"   ? __builtin_add_overflow(x, y, &result)
                        : op == "-" ? __builtin_sub_overflow(x, y, &result)
                        : op == "*" ? __builtin_mul_overflow(x, y, &result)
                                    : x == INT64_MIN && y == -1;
        if (overflow) {
          return fail(expr.line, "integer '" + op + "' overflows 64 bits");
        }
        if (op == "+" || op == "-" || op == "*") {
          return Value::of(result);
        }
        int64_t quotient = x / y - ((x % y != 0) && ((x < 0) != (y < 0)));
        if (op == "//")
          return Value::of(quotient);
        if (op == "%")
          return Value::of(x - quotient * y);
      }
      double x = a.asDouble(), y = b.asDouble();
      if (op == "+")
        return Value::of(x + y);
      if (op == "-")
        return Value::of(x - y);
      if (op == "*")
        return Value::of(x * y);
      if (y == 0) {
        return fail(expr.line, "division by zero");
      }
      if (op == "/")
        return Value::of(x / y);
      if (op == "//")
        return Value::of(std::floor(x / y));
      if (op == "%")
        return Value::of(x - std::floor(x / y) * y);
    }
    return fail(expr.line,
                "'" + op + "' of " + kindName(a) + " and " + kindName(b));
  }

  std::vector<std::map<std::string, Value>> scopes_;
  std::string output_;
  int64_t steps_ = 0;
  int line_ = 1;
};

} // namespace

ChatTemplate::ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate &&) noexcept = default;
ChatTemplate &ChatTemplate::operator=(ChatTemplate &&) noexcept = default;
ChatTemplate::~ChatTemplate() = default;

StatusOr<ChatTemplate> ChatTemplate::parse(const std::string &source) {
  StatusOr<std::vector<Segment>> segments = segment(source);
  if (!segments) {
    return segments.status();
  }
  TemplateParser parser(segments.take());
  ChatTemplate result;
  MFRT_RETURN_IF_ERROR(parser.parseBlock(result.body_, {}));
  return result;
}

StatusOr<std::string> ChatTemplate::render(
    const std::vector<ChatMessage> &messages, bool addGenerationPrompt,
    const std::vector<std::pair<std::string, std::string>> &variables) const {
  List list;
  for (const ChatMessage &message : messages) {
    list.push_back(Value::ofMap({{"role", Value::of(message.role)},
                                 {"content", Value::of(message.content)}}));
  }
  std::map<std::string, Value> globals;
  for (const auto &[name, value] : variables) {
    globals[name] = Value::of(value);
  }
  globals["messages"] = Value::ofList(std::move(list));
  globals["add_generation_prompt"] = Value::of(addGenerationPrompt);
  Renderer renderer(std::move(globals));
  MFRT_RETURN_IF_ERROR(renderer.run(body_));
  return std::move(renderer.output());
}

StatusOr<std::string>
ChatTemplate::renderJson(const std::string &messagesJson,
                         const std::string &variablesJson) const {
  // Ordered: tojson keeps the caller's key order, as Python's dicts do.
  nlohmann::ordered_json messages =
      nlohmann::ordered_json::parse(messagesJson, nullptr, false);
  nlohmann::ordered_json variables =
      nlohmann::ordered_json::parse(variablesJson, nullptr, false);
  if (messages.is_discarded() || !messages.is_array()) {
    return Status::error(StatusCode::InvalidArgument,
                         "messages: expected a JSON list");
  }
  if (variables.is_discarded() || !variables.is_object()) {
    return Status::error(StatusCode::InvalidArgument,
                         "variables: expected a JSON object");
  }
  std::map<std::string, Value> globals;
  for (auto item = variables.begin(); item != variables.end(); ++item) {
    globals[item.key()] = fromJson(item.value());
  }
  globals["messages"] = fromJson(messages);
  Renderer renderer(std::move(globals));
  MFRT_RETURN_IF_ERROR(renderer.run(body_));
  return std::move(renderer.output());
}
