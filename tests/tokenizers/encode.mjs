// Encodes paragraphs with Hugging Face's JavaScript tokenizers (@huggingface/tokenizers), the
// reference of the parity tests in tests/test_hf_tokenizer.cpp (suite HfTokenizerParity).
//   node encode.mjs TOKENIZER_DIR PARAGRAPHS.json OUT.json [--no-special]
// TOKENIZER_DIR holds tokenizer.json and tokenizer_config.json; PARAGRAPHS.json is a JSON array of
// strings; OUT.json receives a JSON array with one array of token ids per paragraph, encoded with
// add_special_tokens true (false with --no-special). Local files only, no network.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";

const [dir, input, output, flag] = process.argv.slice(2);
if (!dir || !input || !output) {
  console.error("usage: node encode.mjs TOKENIZER_DIR PARAGRAPHS.json OUT.json [--no-special]");
  process.exit(2);
}
const tokenizer = new Tokenizer(
  JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8")),
  JSON.parse(readFileSync(join(dir, "tokenizer_config.json"), "utf8")),
);
const paragraphs = JSON.parse(readFileSync(input, "utf8"));
const add_special_tokens = flag !== "--no-special";
const ids = paragraphs.map((p) => tokenizer.encode(p, { add_special_tokens }).ids);
writeFileSync(output, JSON.stringify(ids));
