// Perplexity of a GGUF in llama.cpp (node-llama-cpp 3.21.1, prebuilt CPU binaries, never built
// here) over the windows `autocompress eval` scores (src/eval/eval.h): a token file
// (src/data/token_file.h: magic "ACTOK2\0\0", uint64 count, uint64 vocab_size, uint64
// tokenizer size and hash, int32 ids; version 1, "ACTOK1\0\0", has no tokenizer fields) cut
// into packed windows of SEQ_LEN tokens, the tail dropped (TokenDataset::sequential_batches).
// Each window is evaluated from an empty context; at every position t < SEQ_LEN - 1 llama.cpp's
// probability of the next token x_{t+1} is read (controlledEvaluate with
// generateNext.probabilities: with the default temperature 0 the sampler chain is greedy alone,
// and the probabilities are the softmax of llama.cpp's logits over the whole vocabulary).
//
//   node perplexity.mjs MODEL.gguf TOKENS_FILE [SEQ_LEN] [MAX_WINDOWS] [THREADS]
//
// SEQ_LEN defaults to 256 (eval's --seq-len), MAX_WINDOWS to every window (-1), THREADS to the
// core count. Prints one JSON object: {"llama_cpp", "perplexity", "mean_nll" (nats per predicted
// token), "tokens" (positions scored), "sequences", "wall_s", "threads"}. Run by
// bench/gguf_types.sh (llama.cpp's perplexity column) and tests/test_export.cpp.
//
// In tools/llamacpp/ rather than tests/: measure.mjs is the llama.cpp client autocompress itself
// runs (pipeline/llamacpp_engine.h), and its neighbours share its one node-llama-cpp install
// (scripts/setup_node.sh: tools/llamacpp/node_modules); not in engines/, which holds only the
// engines' JSON data files.
import fs from "node:fs";
import os from "node:os";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const [modelPath, tokensPath, seqText, maxText, threadsText] = process.argv.slice(2);
if (!modelPath || !tokensPath) {
    console.error("usage: node perplexity.mjs MODEL.gguf TOKENS_FILE [SEQ_LEN] [MAX_WINDOWS] [THREADS]");
    process.exit(2);
}
const seqLen = Number(seqText || 256);
const maxWindows = Number(maxText || -1);
const threads = threadsText && Number(threadsText) > 0 ? Number(threadsText)
    : (os.availableParallelism ? os.availableParallelism() : os.cpus().length);

/** The ids of a token file (src/data/token_file.h), checked against its header. */
function readTokenFile(path) {
    const b = fs.readFileSync(path);
    const magic = b.length >= 24 ? b.toString("latin1", 0, 8) : "";
    // Version 2 adds the tokenizer's size and hash (16 bytes) before the ids.
    const header = magic === "ACTOK2\0\0" ? 40 : magic === "ACTOK1\0\0" ? 24 : 0;
    if (header === 0 || b.length < header)
        throw new Error(`${path}: not a token file (magic "ACTOK2\\0\\0" or "ACTOK1\\0\\0" expected)`);
    const count = Number(b.readBigUInt64LE(8));
    if (b.length !== header + 4 * count)
        throw new Error(`${path}: header says ${count} ids (${header + 4 * count} bytes), the file has ${b.length} bytes`);
    const ids = new Array(count);
    for (let i = 0; i < count; ++i) ids[i] = b.readInt32LE(header + 4 * i);
    return ids;
}

const ids = readTokenFile(tokensPath);
let windows = Math.floor(ids.length / seqLen);
if (maxWindows >= 0) windows = Math.min(windows, maxWindows);
if (windows < 1) throw new Error(`${tokensPath}: ${ids.length} tokens, fewer than one window of ${seqLen}`);

const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath});
const context = await model.createContext({contextSize: seqLen, batchSize: seqLen, threads});
const sequence = context.getSequence();
const t0 = performance.now();
let nll = 0, scored = 0;
for (let w = 0; w < windows; ++w) {
    const window = ids.slice(w * seqLen, (w + 1) * seqLen);
    await sequence.clearHistory();
    const input = window.map((token, t) =>
        t < seqLen - 1 ? [token, {generateNext: {probabilities: true}}] : token);
    const out = await sequence.controlledEvaluate(input);
    for (let t = 0; t < seqLen - 1; ++t) {
        const p = out[t]?.next?.probabilities?.get(window[t + 1]);
        if (!(p > 0)) throw new Error(`window ${w}, position ${t}: llama.cpp gives token ${window[t + 1]} probability ${p}`);
        nll -= Math.log(p);
        ++scored;
    }
}
console.log(JSON.stringify({
    llama_cpp: llama.llamaCppRelease,
    perplexity: Math.exp(nll / scored),
    mean_nll: nll / scored,
    tokens: scored,
    sequences: windows,
    wall_s: (performance.now() - t0) / 1000,
    threads,
}));
await context.dispose();
await model.dispose();
await llama.dispose();
