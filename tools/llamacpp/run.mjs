// Runs a GGUF in llama.cpp (node-llama-cpp 3.21.1, prebuilt CPU binaries, never built here) and
// prints one JSON object: llama.cpp's tokenization of the prompt text, its greedy continuation
// of the given prompt ids, the mean decode time per output token (tpot_ms) and each decode step's
// time (token_ms).
//
//   node run.mjs MODEL.gguf "PROMPT TEXT" PROMPT_IDS(comma separated, BOS included) N_TOKENS [THREADS] [CONTEXT]
//
// THREADS defaults to (or 0 means) the core count; CONTEXT (the context size) defaults to 256. ggml's CPU threads wait for each other at every op by
// spinning: on a machine whose cores are busy with other work, more than one thread can make
// each token take a scheduler time slice (hundreds of ms) instead of milliseconds.
//
//   node run.mjs MODEL.gguf --texts=FILE
//
// FILE is a JSON array of strings; prints {"llama_cpp": release, "ids": [[...], ...]}: each text
// tokenized by llama.cpp's tokenizer from the GGUF alone (model.tokenize: llama_tokenize with
// add_special false, so no BOS, and parse_special true, so that the text of an added token is
// that token, as in Hugging Face's tokenizers). No context is created.
//
// AC_LLAMA_LOG=1 in the environment shows llama.cpp's own log (why a file is refused, say).
//
// Used by tests/test_export.cpp (LlamaCpp.*), tests/test_nemotron_h_gguf.cpp (LlamaCppNemotronH.*), tests/test_gguf_tokenizer.cpp (GgufTokenizer.*),
// for the TPOT figure of the export report and by bench/gguf_types.sh (perplexity.mjs beside it
// gives llama.cpp's perplexity).
//
// In tools/llamacpp/ rather than tests/: measure.mjs is the llama.cpp client autocompress itself
// runs (pipeline/llamacpp_engine.h), and its neighbours share its one node-llama-cpp install
// (scripts/setup_node.sh: tools/llamacpp/node_modules); not in engines/, which holds only the
// engines' JSON data files.
import fs from "node:fs";
import os from "node:os";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const args = process.argv.slice(2);
const textsArg = args.find((a) => a.startsWith("--texts="));
if (textsArg) {
    const [modelPath] = args.filter((a) => !a.startsWith("--"));
    const texts = JSON.parse(fs.readFileSync(textsArg.slice("--texts=".length), "utf8"));
    const llama = await getLlama({gpu: false, build: "never", logLevel: process.env.AC_LLAMA_LOG ? LlamaLogLevel.debug : LlamaLogLevel.error});
    const model = await llama.loadModel({modelPath});
    const ids = texts.map((t) => model.tokenize(t, true));
    console.log(JSON.stringify({llama_cpp: llama.llamaCppRelease, ids}));
    await model.dispose();
    await llama.dispose();
    process.exit(0);
}
const [modelPath, promptText, promptIds, nText, threadsText, contextText] = args;
if (!modelPath || promptIds === undefined || !nText) {
    console.error("usage: node run.mjs MODEL.gguf PROMPT_TEXT PROMPT_IDS N_TOKENS");
    process.exit(2);
}
const threads = threadsText && Number(threadsText) > 0 ? Number(threadsText)
    : (os.availableParallelism ? os.availableParallelism() : os.cpus().length);
const contextSize = Math.max(256, Number(contextText || 0));
const llama = await getLlama({gpu: false, build: "never", logLevel: process.env.AC_LLAMA_LOG ? LlamaLogLevel.debug : LlamaLogLevel.error});
const model = await llama.loadModel({modelPath});
const context = await model.createContext({contextSize, batchSize: Math.min(512, contextSize), threads});
const sequence = context.getSequence();

const prompt = promptIds.split(",").map(Number);
const wanted = Number(nText);
const tokens = [];
const stamps = [];
const t0 = performance.now();
// temperature 0 = greedy argmax; no repeat penalty unless asked; keep EOS so that the
// comparison sees it too.
for await (const token of sequence.evaluate(prompt, {temperature: 0, yieldEogToken: true})) {
    stamps.push(performance.now());
    tokens.push(token);
    if (tokens.length >= wanted || model.isEogToken(token)) break;
}
const decodeMs = tokens.length > 1 ? (stamps[stamps.length - 1] - stamps[0]) / (tokens.length - 1) : null;
console.log(JSON.stringify({
    llama_cpp: llama.llamaCppRelease,
    threads,
    prompt_tokens_llama_cpp: model.tokenize(promptText),
    continuation: tokens,
    text: model.detokenize(tokens),
    first_token_ms: stamps.length ? stamps[0] - t0 : null,
    tpot_ms: decodeMs,
    // each decode step's time (ms): the interval between consecutive tokens
    token_ms: stamps.slice(1).map((s, i) => s - stamps[i]),
}));
await context.dispose();
await model.dispose();
await llama.dispose();
