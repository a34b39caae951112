"""Writes the tokenizer test's strings, one JSON string a line: hand-picked
cases (Unicode, CJK, emoji, runs of spaces and newlines, digits, code,
contractions, special tokens) and seeded random mixes of them."""
import json
import random
import sys

CASES = [
    "Hello, who are you?",
    "Hello world",
    " Hello world",
    "  leading spaces",
    "trailing spaces   ",
    "tabs\tand\ttabs\t\t",
    "line one\nline two\n\nline four\n",
    "\n\n\nthree newlines first",
    "windows\r\nline endings\r\n",
    "spaces    between     words",
    "     ",
    "\n",
    " ",
    "a",
    "I'm sure they'll say it's what we've done, isn't it? I'D SAY SO.",
    "Don't STOP. We'RE here; you'Ve seen?",
    "1234567890",
    "3.14159 and 2,718,281 and 1e-9 and 0x1F",
    "year 2024, 12:30pm, +86 138 0013 8000",
    "价格是123元，对吧？",
    "你好，世界！今天天气很好。",
    "日本語のテキストも少し。カタカナとひらがな。",
    "한국어 문장도 있습니다.",
    "Привет, мир! Как дела?",
    "Ελληνικά γράμματα: αβγδε",
    "مرحبا بالعالم",
    "שלום עולם",
    "हिन्दी पाठ",
    "ภาษาไทย",
    "emoji: 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🇨🇳 🏳️‍🌈",
    "mixed 中文 and English and 😀 emoji",
    "accents: café naïve résumé Ångström",
    "combining: cafe\u0301 n\u0303",
    "math: ∑ ∫ √ ∞ ≈ ≠ ≤ ≥ π",
    "symbols: © ® ™ § ¶ † ‡ • …",
    "def f(x):\n    return x ** 2  # square\n",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "if __name__ == \"__main__\":\n\tmain()\n",
    "<html><body class=\"x\">text</body></html>",
    "{\"key\": [1, 2, 3], \"other\": null}",
    "SELECT * FROM users WHERE id = 42;",
    "https://example.com/path?query=1&other=two#frag",
    "email@example.com",
    "C:\\Users\\name\\file.txt",
    "$$$ %%% ^^^ &&& *** ((( )))",
    "----====____",
    "...!!!???",
    "'quoted' \"double\" `back`",
    "ALL CAPS SENTENCE HERE",
    "camelCaseIdentifier and snake_case_identifier",
    "zero\u200bwidth space",
    "nbsp\u00a0here",
    "ideographic\u3000space",
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|>",
    "text<|endoftext|>more text",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "<s>[INST] hello [/INST]</s>",
    "<s> spaced </s>",
    "<unk>",
    "not <|a special|> token",
]

PIECES = [
    "the", " quick", " brown", " fox", "  ", "   ", "\n", "\n\n", "\t", " ",
    "123", "4567", "89", "0", "中文", "模型", "😀", "🚀", "é", "ß", "ﬁ", "'s",
    "'ll", "'RE", "!", "?", ",", ".", ";", "(", ")", "{", "}", "=", "==",
    "->", "::", "x", "Y", "δ", "ж", "ā", "\u0301", "<|im_end|>", "<s>", "</s>",
    "<|eot_id|>", "#", "//", "/*", "*/", "\r\n", "  \n  ", "🇺🇸", "👍🏽",
]


def main():
    rng = random.Random(20261202)
    strings = list(CASES)
    while len(strings) < 300:
        count = rng.randint(1, 12)
        strings.append("".join(rng.choice(PIECES) for _ in range(count)))
    out = open(sys.argv[1], "w", encoding="utf-8") if len(sys.argv) > 1 else sys.stdout
    for text in strings:
        out.write(json.dumps(text) + "\n")


if __name__ == "__main__":
    main()
