// Hugging Face's tokenizers library (Rust, through the Node binding in the
// npm package @anush008/tokenizers), for the tokenizer tests:
//   node hf_tokenizer.js NODE_MODULES tokenizer.json strings.jsonl
//     per line of JSON strings: the ids (no special tokens added), a tab and
//     their decoded text as JSON -- the format of `mf-tokenize --json-lines`;
//   node hf_tokenizer.js NODE_MODULES tokenizer.json --decode 1,2,3
//     the text of the ids, special tokens skipped.
const path = require("path");
const fs = require("fs");
const [nodeModules, tokenizerFile, ...rest] = process.argv.slice(2);
const { Tokenizer } = require(path.join(nodeModules, "@anush008", "tokenizers"));

(async () => {
  const tokenizer = await Tokenizer.fromFile(tokenizerFile);
  if (rest[0] === "--decode") {
    const ids = rest[1].split(",").map(Number);
    process.stdout.write(await tokenizer.decode(ids, true));
    return;
  }
  const lines = fs.readFileSync(rest[0], "utf8").split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  const out = [];
  for (const line of lines) {
    const text = JSON.parse(line);
    const encoding = await tokenizer.encode(text, null, { addSpecialTokens: false });
    const ids = encoding.getIds();
    const decoded = await tokenizer.decode(ids, false);
    out.push(ids.join(",") + "\t" + JSON.stringify(decoded));
  }
  process.stdout.write(out.join("\n") + "\n");
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
