#!/usr/bin/env node
// llama.cpp peer for bench/cpu, through node-llama-cpp's prebuilt CPU
// binaries: the same checkpoint as tsbench (GPT-2 or Qwen2, converted to a
// GGUF by bench/cpu/gguf) and the same cases.
//
// Cases (as defined by bench/cpu/tsbench and torch_peer.py):
//   prefill-128, prefill-512  one prompt through every layer, logits (and a
//                             greedy pick) for the last row only
//   decode-bN                 one greedy decode step for N sequences whose
//                             context is about 140 tokens
//   e2e-bN                    N 128-token prompts, then 63 decode steps (64
//                             greedy tokens each)
// Several sequences are evaluated as one llama_decode batch: each sequence
// of one context queues its tokens and node-llama-cpp dispatches everything
// queued in the same event-loop cycle as a single batch (batchSize 512 fits
// a step of every case here).
//
// Each case prints the median of --reps timed runs after one warm-up run,
// one JSON object per line: {"engine":"llama.cpp","case":...,"ms":...,"runs":...}.
// Only the evaluation is timed (llama_decode plus node-llama-cpp's greedy
// sampling of the rows asked for); clearing the KV cache between runs is not.
//
// Before the cases it prints one JSON line {"engine":"llama.cpp","config":
// {...}} saying how llama.cpp is really set up (threads the context runs,
// the ggml CPU library loaded, llama.cpp's system info, the GGUF's file
// type), so that the caller can verify and record it.
//
// --check N: instead of timing, generate N greedy tokens from a fixed
// prompt and compare them with tinyserve's (--expect FILE, the JSON printed
// by `go run ./bench/cpu/gguf -greedy`): free-running agreement, and
// teacher-forced agreement (llama.cpp's argmax at each position when fed
// tinyserve's tokens). A difference counts as a near-tie when tinyserve's
// own top-1 minus top-2 logit margin at that step is under --tie (0.05);
// the check fails (exit status 3) on any other difference.
//
// Usage: node llamacpp_peer.mjs --model FILE.gguf [--vocab 50257] [--reps 5]
//        [--threads 2] [--cases ...] [--ctx 1024] [--batch 512]
//        [--kv f16|f32] [--flash auto|true|false] [--log warn|info|debug]
//        [--check 16 --expect tinyserve.json [--tie 0.05]]
// node-llama-cpp is loaded from $LLAMACPP_DIR/node_modules (llamacpp.sh
// installs it there).

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {pathToFileURL} from "node:url";

const DECODE_CONTEXT = 140;

function parseArgs(argv) {
    const a = {
        model: "", reps: 5, threads: os.availableParallelism(), ctx: 1024, batch: 512, kv: "f16",
        cases: "prefill-128,prefill-512,decode-b1,decode-b4,decode-b8,decode-b32,e2e-b1,e2e-b4",
        check: 0, expect: "", promptLen: 32, flash: "auto", log: "warn", vocab: 50257, tie: 0.05,
    };
    for (let i = 2; i < argv.length; i++) {
        const k = argv[i].replace(/^--/, "");
        const v = argv[++i];
        if (v === undefined) throw new Error(`missing value for --${k}`);
        switch (k) {
            case "model": a.model = v; break;
            case "reps": a.reps = Number(v); break;
            case "threads": a.threads = Number(v); break;
            case "ctx": a.ctx = Number(v); break;
            case "batch": a.batch = Number(v); break;
            case "kv": a.kv = v; break;
            case "cases": a.cases = v; break;
            case "check": a.check = Number(v); break;
            case "expect": a.expect = v; break;
            case "prompt-len": a.promptLen = Number(v); break;
            case "flash": a.flash = v; break;
            case "log": a.log = v; break;
            case "vocab": a.vocab = Number(v); break;
            case "tie": a.tie = Number(v); break;
            default: throw new Error(`unknown flag --${k}`);
        }
    }
    if (!a.model) throw new Error("--model FILE.gguf is required");
    if (!["f16", "f32"].includes(a.kv)) throw new Error("--kv must be f16 or f32");
    return a;
}

// vocab is the model's vocabulary size (--vocab), which tsbench's
// deterministic prompt ids are taken modulo.
let vocab = 50257;

// tokens returns tsbench's deterministic prompt ids for sequence s.
function tokens(s, n) {
    const t = new Array(n);
    for (let i = 0; i < n; i++) t[i] = (s * 7919 + i * 104729) % vocab;
    return t;
}

const greedy = {generateNext: {token: true, options: {temperature: 0}}};

// evalInput feeds ids and asks for a greedy token after the last one only.
function evalInput(ids) {
    const input = ids.slice(0, -1);
    input.push([ids[ids.length - 1], greedy]);
    return input;
}

// step evaluates ids[s] on sequence s for every sequence at once (one
// batch) and returns each sequence's greedy next token.
async function step(seqs, ids) {
    const outs = await Promise.all(seqs.map((q, s) => q.controlledEvaluate(evalInput(ids[s]))));
    return outs.map((o, s) => {
        const r = o[ids[s].length - 1];
        if (r?.next?.token == null) throw new Error("llama.cpp returned no token");
        return r.next.token;
    });
}

const median = (xs) => {
    const s = [...xs].sort((a, b) => a - b);
    const m = s.length >> 1;
    return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

async function loadNodeLlamaCpp() {
    const dir = process.env.LLAMACPP_DIR || path.join(os.homedir(), ".cache", "tinyserve-llamacpp");
    const entry = path.join(dir, "node_modules", "node-llama-cpp", "dist", "index.js");
    if (!fs.existsSync(entry)) throw new Error(`node-llama-cpp is not installed in ${dir} (run bench/cpu/llamacpp.sh)`);
    const version = JSON.parse(fs.readFileSync(path.join(dir, "node_modules", "node-llama-cpp", "package.json"), "utf8")).version;
    let release = "?";
    try {
        release = JSON.parse(fs.readFileSync(path.join(dir, "node_modules", "node-llama-cpp", "llama", "binariesGithubRelease.json"), "utf8")).release;
    } catch {}
    return {mod: await import(pathToFileURL(entry).href), version, release};
}

async function main() {
    const args = parseArgs(process.argv);
    vocab = args.vocab;
    const {mod, version, release} = await loadNodeLlamaCpp();
    const {getLlama, LlamaLogLevel, GgmlType} = mod;
    const llama = await getLlama({
        gpu: false, build: "never", maxThreads: args.threads, logLevel: LlamaLogLevel[args.log] ?? LlamaLogLevel.warn,
    });
    const model = await llama.loadModel({modelPath: args.model, gpuLayers: 0});
    const kvType = args.kv.toUpperCase();
    const kvGgml = GgmlType[kvType];
    const flash = args.flash === "auto" ? "auto" : args.flash === "true";
    const newContext = async (sequences) => {
        const ctx = await model.createContext({
            sequences, contextSize: args.ctx, batchSize: args.batch, threads: {ideal: args.threads, min: args.threads},
            flashAttention: flash, experimentalKvCacheKeyType: kvGgml, experimentalKvCacheValueType: kvGgml,
        });
        const seqs = [];
        for (let s = 0; s < sequences; s++) seqs.push(ctx.getSequence());
        return {ctx, seqs};
    };
    console.error(`llama.cpp peer: node-llama-cpp ${version}, llama.cpp ${release}, ` +
        `${llama.cpuMathCores} math cores, ${args.threads} threads, GPU ${llama.gpu}, ` +
        `context ${args.ctx}/seq, batch ${args.batch}, KV ${kvType}, flash attention ${args.flash}`);
    {
        // What a user would get, as llama.cpp itself reports it, from a
        // context made as the cases make theirs.
        const {ctx} = await newContext(1);
        const meta = model.fileInfo?.metadata?.general ?? {};
        const config = {
            node_llama_cpp: version, llama_cpp: release, build: llama.buildType, gpu: llama.gpu,
            threads_requested: args.threads, context_threads: ctx.currentThreads, ideal_threads: ctx.idealThreads,
            max_threads: llama.maxThreads, cpu_math_cores: llama.cpuMathCores,
            ggml_cpu_libraries: ggmlCpuLibraries(), system_info: llama.systemInfo,
            gguf_file_type: meta.file_type, gguf_architecture: meta.architecture,
            context_per_seq: args.ctx, batch: args.batch, kv: kvType, flash_attention: ctx.flashAttention,
            vocab: args.vocab,
        };
        await ctx.dispose();
        console.log(JSON.stringify({engine: "llama.cpp", config}));
    }

    if (args.check > 0) {
        await check(args, newContext);
        await model.dispose();
        return;
    }

    for (const c of args.cases.split(",").filter(Boolean)) {
        const m = /^(prefill|decode|e2e)-(b?)(\d+)$/.exec(c);
        if (!m) throw new Error(`unknown case ${c}`);
        const kind = m[1], n = Number(m[3]);
        const seqCount = kind === "prefill" ? 1 : n;
        if (kind === "prefill" && n > args.batch) throw new Error(`${c}: batch size ${args.batch} is less than ${n}`);
        const {ctx, seqs} = await newContext(seqCount);
        const clear = () => Promise.all(seqs.map((q) => q.clearHistory()));
        const times = [];
        let next = null;
        for (let i = 0; i <= args.reps; i++) {
            if (kind === "prefill") {
                await clear();
                const t = performance.now();
                await step(seqs, [tokens(0, n)]);
                times.push(performance.now() - t);
            } else if (kind === "decode") {
                if (i === 0) {
                    await clear();
                    next = await step(seqs, seqs.map((_, s) => tokens(s, DECODE_CONTEXT)));
                }
                const t = performance.now();
                next = await step(seqs, next.map((id) => [id]));
                times.push(performance.now() - t);
            } else {
                await clear();
                const t = performance.now();
                let nx = await step(seqs, seqs.map((_, s) => tokens(s, 128)));
                for (let k = 0; k < 63; k++) nx = await step(seqs, nx.map((id) => [id]));
                times.push(performance.now() - t);
            }
        }
        await ctx.dispose();
        const timed = times.slice(1);
        console.log(JSON.stringify({engine: "llama.cpp", case: c, ms: Math.round(median(timed) * 100) / 100, runs: timed.length}));
    }
    await model.dispose();
}

// ggmlCpuLibraries lists the ggml CPU backends this process has loaded
// (node-llama-cpp's prebuilt binaries pick one variant per CPU, e.g.
// libggml-cpu-zen4.so), from /proc/self/maps.
function ggmlCpuLibraries() {
    try {
        const maps = fs.readFileSync("/proc/self/maps", "utf8");
        return [...new Set(maps.split("\n").map((l) => l.split(/\s+/)[5]).filter((p) => p && /libggml-cpu[^/]*\.so/.test(p)).map((p) => path.basename(p)))];
    } catch {
        return [];
    }
}

async function check(args, newContext) {
    const n = args.check;
    const want = args.expect ? JSON.parse(fs.readFileSync(args.expect, "utf8")) : null;
    const prompt = want?.prompt ?? tokens(0, args.promptLen);
    const {ctx, seqs} = await newContext(1);
    const q = seqs[0];

    // Free-running greedy generation; the first step also returns the top
    // logits.
    const first = await q.controlledEvaluate([...prompt.slice(0, -1),
        [prompt[prompt.length - 1], {generateNext: {token: true, options: {temperature: 0}, logits: {filter: {includeTop: 5}}}}]]);
    const r0 = first[prompt.length - 1].next;
    const got = [r0.token];
    const top = [...(r0.logits ?? new Map()).entries()].slice(0, 5).map(([id, l]) => [id, Math.round(l * 1e4) / 1e4]);
    while (got.length < n) got.push((await step([q], [[got[got.length - 1]]]))[0]);

    const out = {engine: "llama.cpp", check: `greedy-${n}`, prompt_len: prompt.length, llama_cpp: got, top};
    if (want) {
        const ref = want.tokens.slice(0, n);
        let prefix = 0;
        while (prefix < n && got[prefix] === ref[prefix]) prefix++;
        out.tinyserve = ref;
        out.tinyserve_top = (want.top ?? []).map(([id, l]) => [id, Math.round(l * 1e4) / 1e4]);
        out.agree = got.filter((t, i) => t === ref[i]).length;
        out.agree_prefix = prefix;

        // Teacher forcing: feed tinyserve's tokens and take llama.cpp's argmax
        // at each of the n positions.
        await q.clearHistory();
        const input = [...prompt.slice(0, -1)];
        const feed = [prompt[prompt.length - 1], ...ref.slice(0, n - 1)];
        for (const id of feed) input.push([id, greedy]);
        const res = await q.controlledEvaluate(input);
        const forced = feed.map((_, i) => res[prompt.length - 1 + i]?.next?.token);
        out.teacher_forced = forced;
        out.teacher_forced_agree = forced.filter((t, i) => t === ref[i]).length;

        // Differences are allowed only after a near-tie, by tinyserve's own
        // logits: free-running, at the first step that differs (what
        // follows has different contexts); teacher-forced, at every step
        // that differs.
        const margins = want.margins ?? [];
        const near = (i) => margins[i] !== undefined && margins[i] < args.tie;
        out.tie = args.tie;
        out.margins = margins.slice(0, n).map((m) => Math.round(m * 1e4) / 1e4);
        out.first_difference = prefix < n ? {step: prefix, margin: out.margins[prefix] ?? null} : null;
        out.teacher_forced_differences = forced.flatMap((t, i) => t === ref[i] ? [] : [{step: i, margin: out.margins[i] ?? null}]);
        out.ok = (prefix === n || near(prefix)) && forced.every((t, i) => t === ref[i] || near(i));
        console.error(`llama.cpp peer: greedy check: ${out.agree}/${n} tokens agree with tinyserve ` +
            `(first ${prefix} in a row${prefix < n ? `, tinyserve's margin there ${out.margins[prefix]}` : ""}), ` +
            `teacher-forced ${out.teacher_forced_agree}/${n}` +
            (out.teacher_forced_differences.length ? ` (margins where they differ: ${out.teacher_forced_differences.map((d) => d.margin).join(", ")})` : "") +
            `: ${out.ok ? "OK" : `FAILED: a difference where tinyserve's margin is ${args.tie} or more`}`);
    }
    console.log(JSON.stringify(out));
    await ctx.dispose();
    if (out.ok === false) process.exitCode = 3;
}

main().catch((e) => {
    console.error(`llama.cpp peer: ${e?.stack ?? e}`);
    process.exit(1);
});
