// Measures GGUF models in llama.cpp (node-llama-cpp 3.21.1, prebuilt CPU binaries) in
// interleaved rounds and prints one JSON object: per model, the time to the first token of each
// run (TTFT: the prompt's prefill and the first sampled token), every decode interval of every
// run (TPOT samples), and the buffers llama.cpp itself reports allocating (its log lines
// "model buffer size", "KV buffer size", "output buffer size", "compute buffer size").
//
//   node measure.mjs JOB.json
//
// JOB.json: {"models": ["a.gguf", ...], "prompt": [ids, BOS included], "output_tokens": N (>= 1),
//            "threads": T, "context": C, "rounds": R, "batch": B}
// Each round loads each model in turn, creates a context of C cells (B tokens per micro-batch,
// T threads), decodes N tokens greedily (an end-of-text token does not stop it: every run decodes
// the same number of steps) and disposes of it, so that a drift of the machine's speed hits
// every model alike. Loading is not timed.
//
// Prints {"llama_cpp": release, "threads": T, "context": C, "models": [{"path", "buffers":
// {"model", "kv", "output", "compute"} (bytes, from the first round), "model_buffer_types"},
// "runs": [{"ttft_ms", "token_ms": [N - 1 decode intervals]}]}]}. Run by calibrate / validate --engine llama.cpp and
// compress's llama.cpp stage (pipeline/llamacpp_engine.h llamacpp_client).
//
// In tools/llamacpp/ rather than tests/: measure.mjs is the llama.cpp client autocompress itself
// runs (pipeline/llamacpp_engine.h), and its neighbours share its one node-llama-cpp install
// (scripts/setup_node.sh: tools/llamacpp/node_modules); not in engines/, which holds only the
// engines' JSON data files.
import fs from "node:fs";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const job = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
for (const k of ["models", "prompt", "output_tokens", "threads", "context", "rounds"])
    if (job[k] === undefined) {
        console.error(`measure.mjs: ${process.argv[2]}: missing field "${k}"`);
        process.exit(2);
    }

let log = [];
const llama = await getLlama({
    gpu: false, build: "never", logLevel: LlamaLogLevel.info,
    logger: (level, message) => { log.push(message); },
});

// "<type> <what> buffer size =  58.64 MiB" -> bytes, summed over buffer types (CPU, CPU_Mapped,
// ...). model_buffer_types lists the types that held weights: a type other than CPU and
// CPU_Mapped (AMX on CPUs with AMX, CPU_REPACK) is a copy of the weights repacked for the CPU's
// kernels, allocated beside the mapped file.
function buffers(lines) {
    const out = {model: 0, kv: 0, output: 0, compute: 0, model_buffer_types: []};
    for (const line of lines) {
        const m = /(\S+)\s+(model|KV|output|compute) buffer size\s*=\s*([0-9.]+) MiB/.exec(line);
        if (!m) continue;
        out[m[2] === "KV" ? "kv" : m[2]] += Math.round(Number(m[3]) * 1024 * 1024);
        if (m[2] === "model" && !out.model_buffer_types.includes(m[1])) out.model_buffer_types.push(m[1]);
    }
    return out;
}

const results = job.models.map((path) => ({path, runs: []}));
for (let round = 0; round < job.rounds; ++round) {
    for (const r of results) {
        log = [];
        const model = await llama.loadModel({modelPath: r.path});
        const context = await model.createContext({
            contextSize: job.context, batchSize: Math.min(job.batch || 512, job.context),
            threads: job.threads, sequences: 1,
        });
        const sequence = context.getSequence();
        const stamps = [];
        const t0 = performance.now();
        for await (const token of sequence.evaluate(job.prompt, {temperature: 0, yieldEogToken: true})) {
            stamps.push(performance.now());
            if (stamps.length >= job.output_tokens) break;
        }
        r.runs.push({ttft_ms: stamps[0] - t0,
                     token_ms: stamps.slice(1).map((s, i) => s - stamps[i])});
        // The log lines of the context's buffers may arrive after createContext resolves.
        if (round === 0) r.buffers = buffers(log);
        await context.dispose();
        await model.dispose();
    }
}
const release = llama.llamaCppRelease;
console.log(JSON.stringify({llama_cpp: typeof release === "object" ? release.release : release,
                            threads: job.threads,
                            context: job.context, rounds: job.rounds, models: results}));
await llama.dispose();
