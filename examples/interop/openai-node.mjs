// Interoperability check of tinyserve's OpenAI-compatible server with the
// official OpenAI Node SDK (npm package "openai"). run.sh installs a pinned
// SDK version, starts the server and runs this script; see docs/server.md.
//
// Usage: node openai-node.mjs http://127.0.0.1:PORT
//
// Every check asserts what the SDK's own types promise (Completion,
// CompletionChoice, CompletionUsage, Model, APIError and its subclasses)
// plus the documented tinyserve/vLLM behaviour the SDK passes through
// (greedy and seeded reproducibility, echo, stop, usage counts). Each check
// prints "ok" or "FAIL" with the mismatch; the exit status is 1 if any failed.
// The expected token counts assume GPT-2's tokenizer (tiny-gpt2, or a GPT-2
// checkpoint), and the abort checks read vLLM's metric names on /metrics.

import OpenAI, { APIError, APIUserAbortError, AuthenticationError, BadRequestError, NotFoundError } from 'openai';

const base = process.argv[2];
if (!base) {
	console.error('usage: node openai-node.mjs http://HOST:PORT');
	process.exit(2);
}
// run.sh starts the server with --api-key and --enable-prefix-caching and
// says so in these variables; with other flags the checks of either skip.
const apiKey = process.env.INTEROP_API_KEY || 'unused';
const prefixCaching = process.env.INTEROP_PREFIX_CACHING === '1';
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey, maxRetries: 0, timeout: 60_000 });

// ---- assertions -------------------------------------------------------------

class Mismatch extends Error {}

function ok(cond, what) {
	if (!cond) throw new Mismatch(what);
}

function eq(got, want, what) {
	const g = JSON.stringify(got);
	const w = JSON.stringify(want);
	if (g !== w) throw new Mismatch(`${what}: got ${g}, want ${w}`);
}

const isInt = (v) => Number.isInteger(v);

// checkUsage checks a CompletionUsage.
function checkUsage(u, what) {
	ok(u && typeof u === 'object', `${what}: usage is missing`);
	for (const k of ['prompt_tokens', 'completion_tokens', 'total_tokens']) {
		ok(isInt(u[k]) && u[k] >= 0, `${what}: usage.${k} is ${JSON.stringify(u[k])}, want a non-negative integer`);
	}
	eq(u.total_tokens, u.prompt_tokens + u.completion_tokens, `${what}: usage.total_tokens`);
}

// checkLogprobs checks a CompletionChoice.Logprobs against the choice's text.
function checkLogprobs(lp, text, maxTop, what) {
	ok(lp && typeof lp === 'object', `${what}: logprobs is ${JSON.stringify(lp)}, want an object`);
	const n = lp.tokens.length;
	for (const k of ['tokens', 'token_logprobs', 'top_logprobs', 'text_offset']) {
		ok(Array.isArray(lp[k]) && lp[k].length === n, `${what}: logprobs.${k} is not an array of ${n}`);
	}
	eq(lp.tokens.join(''), text, `${what}: logprobs.tokens joined`);
	let offset = lp.text_offset[0] ?? 0;
	for (let i = 0; i < n; i++) {
		ok(typeof lp.tokens[i] === 'string', `${what}: tokens[${i}] is not a string`);
		ok(typeof lp.token_logprobs[i] === 'number' && lp.token_logprobs[i] <= 0,
			`${what}: token_logprobs[${i}] = ${lp.token_logprobs[i]}, want a number <= 0`);
		const top = lp.top_logprobs[i];
		ok(top && typeof top === 'object' && !Array.isArray(top), `${what}: top_logprobs[${i}] is not an object`);
		const entries = Object.entries(top);
		ok(entries.length >= 1 && entries.length <= maxTop + 1,
			`${what}: top_logprobs[${i}] has ${entries.length} entries, want 1..${maxTop + 1}`);
		ok(entries.every(([, v]) => typeof v === 'number' && v <= 0), `${what}: top_logprobs[${i}] has a value that is not a number <= 0`);
		eq(lp.text_offset[i], offset, `${what}: text_offset[${i}]`);
		offset += [...lp.tokens[i]].length;
	}
}

// checkCompletion checks one Completion (a response, or a chunk of a stream).
function checkCompletion(c, what, { chunk = false } = {}) {
	ok(typeof c.id === 'string' && c.id.length > 0, `${what}: id is ${JSON.stringify(c.id)}`);
	eq(c.object, 'text_completion', `${what}: object`);
	ok(isInt(c.created) && Math.abs(c.created - Date.now() / 1000) < 3600,
		`${what}: created is ${c.created}, want a Unix time in seconds near now`);
	ok(typeof c.model === 'string' && c.model.length > 0, `${what}: model is ${JSON.stringify(c.model)}`);
	ok(Array.isArray(c.choices), `${what}: choices is not an array`);
	for (const ch of c.choices) {
		ok(isInt(ch.index) && ch.index >= 0, `${what}: choice index is ${ch.index}`);
		ok(typeof ch.text === 'string', `${what}: choice ${ch.index} text is not a string`);
		ok('logprobs' in ch, `${what}: choice ${ch.index} has no logprobs field (want null or an object)`);
		const fr = ch.finish_reason;
		if (chunk) {
			ok(fr === null || fr === 'stop' || fr === 'length', `${what}: choice ${ch.index} finish_reason is ${JSON.stringify(fr)}`);
		} else {
			ok(fr === 'stop' || fr === 'length', `${what}: choice ${ch.index} finish_reason is ${JSON.stringify(fr)}`);
		}
	}
	if (!chunk) checkUsage(c.usage, what);
}

// collect reads a stream to its end and checks every chunk.
async function collect(stream, what) {
	const chunks = [];
	for await (const c of stream) {
		checkCompletion(c, `${what}: chunk ${chunks.length}`, { chunk: true });
		chunks.push(c);
	}
	ok(chunks.length > 0, `${what}: the stream had no chunks`);
	const id = chunks[0].id;
	ok(chunks.every((c) => c.id === id), `${what}: the chunks do not share one id`);
	return chunks;
}

// fold folds a stream's chunks into each choice's text and finish_reason,
// checking that each choice finishes exactly once, in its last chunk.
function fold(chunks, what) {
	const out = new Map();
	for (const c of chunks) {
		for (const ch of c.choices) {
			const s = out.get(ch.index) ?? { text: '', finish: null, tokens: [] };
			ok(s.finish === null, `${what}: choice ${ch.index} has a chunk after its finish_reason`);
			s.text += ch.text;
			s.finish = ch.finish_reason;
			if (ch.logprobs) s.tokens.push(...ch.logprobs.tokens);
			out.set(ch.index, s);
		}
	}
	for (const [i, s] of out) ok(s.finish !== null, `${what}: choice ${i} never got a finish_reason`);
	return out;
}

// expectAPIError runs fn and checks that it throws the SDK error class
// klass with the given fields.
async function expectAPIError(fn, klass, want, what) {
	let err;
	try {
		await fn();
	} catch (e) {
		err = e;
	}
	ok(err !== undefined, `${what}: no error was thrown`);
	ok(err instanceof APIError, `${what}: threw ${err?.constructor?.name}: ${err?.message}, want an APIError`);
	ok(err instanceof klass, `${what}: threw ${err.constructor.name}, want ${klass.name}`);
	eq(err.status, want.status, `${what}: status`);
	eq(err.type, want.type, `${what}: type`);
	eq(err.code, want.code, `${what}: code`);
	eq(err.param, want.param, `${what}: param`);
	ok(typeof err.error?.message === 'string' && want.message.test(err.error.message),
		`${what}: message ${JSON.stringify(err.error?.message)} does not match ${want.message}`);
	eq(err.message, `${want.status} ${err.error.message}`, `${what}: the SDK's message`);
	const requestID = err.requestID ?? err.request_id; // openai 4 names it request_id
	ok(typeof requestID === 'string' && requestID.length > 0, `${what}: requestID (X-Request-ID) is ${requestID}`);
	return err;
}

// ---- helpers over the server's own (vLLM) routes -----------------------------

async function promptTokens(text) {
	// fetch labels a string body text/plain, which the server (as vLLM's
	// FastAPI) refuses as not JSON: say what it is.
	const r = await fetch(`${base}/tokenize`, {
		method: 'POST',
		headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${apiKey}` },
		body: JSON.stringify({ prompt: text }),
	});
	ok(r.ok, `/tokenize answered ${r.status}`);
	return (await r.json()).count;
}

async function metric(name, labels = '') {
	const text = await (await fetch(`${base}/metrics`)).text();
	let sum = 0;
	for (const line of text.split('\n')) {
		if (line.startsWith(name + '{') && line.includes(labels)) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
	}
	return sum;
}

async function waitFor(cond, what, ms = 10_000) {
	const end = Date.now() + ms;
	while (Date.now() < end) {
		if (await cond()) return;
		await new Promise((r) => setTimeout(r, 50));
	}
	throw new Mismatch(`${what}: not so after ${ms} ms`);
}

async function healthy(what) {
	const r = await fetch(`${base}/health`);
	eq([r.status, await r.json()], [200, { status: 'ok' }], `${what}: /health`);
}

// ---- the checks -------------------------------------------------------------

const checks = [];
const check = (name, fn) => checks.push({ name, fn });

let model; // the served model name, from models.list
const prompt = 'Hello, my name is';
const helloIDs = [15496, 11, 616, 1438, 318]; // GPT-2's tokens of `prompt`
let greedy12; // the greedy 12-token continuation of `prompt`

check('models.list', async () => {
	const page = await client.models.list();
	ok(Array.isArray(page.data) && page.data.length >= 1, 'models.list: data is empty');
	for (const m of page.data) {
		ok(typeof m.id === 'string' && m.id.length > 0, `model id is ${JSON.stringify(m.id)}`);
		eq(m.object, 'model', `model ${m.id}: object`);
		ok(isInt(m.created) && Math.abs(m.created - Date.now() / 1000) < 86400, `model ${m.id}: created is ${m.created}`);
		ok(typeof m.owned_by === 'string', `model ${m.id}: owned_by is ${JSON.stringify(m.owned_by)}`);
	}
	const seen = [];
	for await (const m of client.models.list()) seen.push(m.id); // auto-pagination ends after one page
	eq(seen, page.data.map((m) => m.id), 'models.list: for await');
	model = page.data[0].id;
});

check('models.retrieve', async () => {
	const m = await client.models.retrieve(model);
	eq(m.id, model, 'models.retrieve: id');
	eq(m.object, 'model', 'models.retrieve: object');
	await expectAPIError(() => client.models.retrieve('no-such-model'), NotFoundError, { status: 404, type: 'invalid_request_error', code: 'model_not_found', param: 'model', message: /^The model `no-such-model` does not exist\.$/ }, 'models.retrieve unknown');
});

check('completions: string prompt, greedy, max_tokens', async () => {
	const { data: c, response } = await client.completions
		.create({ model, prompt, max_tokens: 12, temperature: 0 })
		.withResponse();
	checkCompletion(c, 'completion');
	eq(c.model, model, 'model');
	eq(c.choices.length, 1, 'choices');
	eq(c.choices[0].index, 0, 'index');
	eq(c.choices[0].logprobs, null, 'logprobs without asking');
	eq(c.choices[0].finish_reason, 'length', 'finish_reason');
	eq(c.usage, { prompt_tokens: 5, completion_tokens: 12, total_tokens: 17 }, 'usage');
	eq(c._request_id, response.headers.get('x-request-id'), '_request_id');
	ok(c._request_id, 'the response has no X-Request-ID');
	greedy12 = c.choices[0].text;
	const again = await client.completions.create({ model, prompt, max_tokens: 12, temperature: 0 });
	eq(again.choices[0].text, greedy12, 'greedy text, second time');
	const one = await client.completions.create({ model, prompt, max_tokens: 1, temperature: 0 });
	eq([one.choices[0].finish_reason, one.usage.completion_tokens], ['length', 1], 'max_tokens 1');
	ok(greedy12.startsWith(one.choices[0].text), 'max_tokens 1: not a prefix of the 12-token text');
});

check('completions: max_tokens null fills the context (as vLLM)', async () => {
	// An omitted max_tokens is 16; an explicit null is vLLM's "no limit":
	// generation runs to the end of the context (max_model_len).
	const ctx = (await client.models.list()).data.find((m) => m.id === model)?.max_model_len;
	ok(isInt(ctx) && ctx > 5, `models.list: max_model_len is ${ctx}`);
	const c = await client.completions.create({ model, prompt, max_tokens: null, temperature: 0, ignore_eos: true });
	checkCompletion(c, 'completion');
	eq(c.usage.completion_tokens, ctx - c.usage.prompt_tokens, 'completion_tokens (the rest of the context)');
	eq(c.choices[0].finish_reason, 'length', 'finish_reason');
	ok(c.choices[0].text.startsWith(greedy12), 'not the greedy continuation');
});

check('completions: list of prompts', async () => {
	const prompts = ['Hello', 'The quick brown fox', prompt];
	const c = await client.completions.create({ model, prompt: prompts, max_tokens: 12, temperature: 0 });
	checkCompletion(c, 'completion');
	eq(c.choices.map((ch) => ch.index), [0, 1, 2], 'indices');
	eq(c.choices[2].text, greedy12, 'the third prompt\'s text (as alone)');
	let want = 0;
	for (const p of prompts) want += await promptTokens(p);
	eq(c.usage.prompt_tokens, want, 'usage.prompt_tokens');
	eq(c.usage.completion_tokens, 36, 'usage.completion_tokens');
});

check('completions: token-id prompts', async () => {
	const c = await client.completions.create({ model, prompt: helloIDs, max_tokens: 12, temperature: 0 });
	checkCompletion(c, 'completion');
	eq(c.choices[0].text, greedy12, 'text (as from the string prompt)');
	eq(c.usage.prompt_tokens, 5, 'usage.prompt_tokens');
	const l = await client.completions.create({ model, prompt: [helloIDs, [15496]], max_tokens: 12, temperature: 0 });
	checkCompletion(l, 'list of token lists');
	eq(l.choices.map((ch) => ch.index), [0, 1], 'list of token lists: indices');
	eq(l.choices[0].text, greedy12, 'list of token lists: text');
	eq(l.usage.prompt_tokens, 6, 'list of token lists: usage.prompt_tokens');
});

check('completions: n=2 with seed', async () => {
	const req = { model, prompt: ['Once upon a time', 'Hello'], n: 2, seed: 7, temperature: 1, max_tokens: 8 };
	const a = await client.completions.create(req);
	checkCompletion(a, 'completion');
	eq(a.choices.map((ch) => ch.index), [0, 1, 2, 3], 'indices (prompt p, choice j at p*n+j)');
	ok(a.choices[0].text !== a.choices[1].text, 'the two choices of a seeded n=2 request are the same');
	eq(a.usage.prompt_tokens, (await promptTokens('Once upon a time')) + 1, 'usage.prompt_tokens counts each prompt once');
	eq(a.usage.completion_tokens, 4 * 8, 'usage.completion_tokens');
	const b = await client.completions.create(req);
	eq(b.choices.map((ch) => ch.text), a.choices.map((ch) => ch.text), 'the same seeded request again');
});

check('completions: seed', async () => {
	const req = { model, prompt, seed: 1234, temperature: 1, top_p: 1, max_tokens: 8 };
	const a = await client.completions.create(req);
	const b = await client.completions.create(req);
	eq(b.choices[0].text, a.choices[0].text, 'the same seed twice');
	const c = await client.completions.create({ ...req, seed: 1235 });
	ok(c.choices[0].text !== a.choices[0].text, 'seeds 1234 and 1235 gave the same text');
});

check('completions: logprobs', async () => {
	const c = await client.completions.create({ model, prompt, max_tokens: 12, temperature: 0, logprobs: 3 });
	checkCompletion(c, 'completion');
	const ch = c.choices[0];
	eq(ch.text, greedy12, 'text');
	checkLogprobs(ch.logprobs, ch.text, 3, 'logprobs');
	eq(ch.logprobs.tokens.length, 12, 'one logprobs entry per token');
	eq(ch.logprobs.text_offset[0], 0, 'text_offset[0]');
	const z = await client.completions.create({ model, prompt, max_tokens: 4, temperature: 0, logprobs: 0 });
	checkLogprobs(z.choices[0].logprobs, z.choices[0].text, 0, 'logprobs 0');
});

check('completions: echo', async () => {
	const c = await client.completions.create({ model, prompt, max_tokens: 12, temperature: 0, echo: true });
	checkCompletion(c, 'completion');
	eq(c.choices[0].text, prompt + greedy12, 'text');
	const t = await client.completions.create({ model, prompt: helloIDs, max_tokens: 12, temperature: 0, echo: true });
	eq(t.choices[0].text, prompt + greedy12, 'token-id prompt: text');
});

check('completions: echo with logprobs scores the prompt (max_tokens 0 and 12)', async () => {
	const c = await client.completions.create({ model, prompt, max_tokens: 0, temperature: 0, echo: true, logprobs: 1 });
	checkCompletion(c, 'completion');
	const ch = c.choices[0];
	eq(ch.text, prompt, 'max_tokens 0: the prompt alone');
	eq(c.usage.completion_tokens, 0, 'max_tokens 0: completion_tokens');
	eq(ch.finish_reason, 'length', 'max_tokens 0: finish_reason');
	const lp = ch.logprobs;
	eq(lp.tokens.length, helloIDs.length, 'one entry per prompt token');
	eq(lp.token_logprobs[0], null, 'the first prompt token: token_logprobs null');
	eq(lp.top_logprobs[0], null, 'the first prompt token: top_logprobs null');
	// The rest is a well-formed logprobs object over the prompt's tail.
	const rest = { tokens: lp.tokens.slice(1), token_logprobs: lp.token_logprobs.slice(1), top_logprobs: lp.top_logprobs.slice(1), text_offset: lp.text_offset.slice(1) };
	checkLogprobs(rest, prompt.slice(lp.tokens[0].length), 1, 'prompt logprobs');
	const g = await client.completions.create({ model, prompt: helloIDs, max_tokens: 12, temperature: 0, echo: true, logprobs: 1 });
	const gl = g.choices[0].logprobs;
	eq(g.choices[0].text, prompt + greedy12, 'max_tokens 12: text');
	eq(gl.tokens.length, helloIDs.length + 12, 'max_tokens 12: prompt and completion entries');
	eq(gl.token_logprobs.slice(0, helloIDs.length), lp.token_logprobs, 'the same prompt scores the same, as text or token ids');
});

check("completions: vLLM's prompt_logprobs field", async () => {
	const c = await client.completions.create({ model, prompt: helloIDs, max_tokens: 1, temperature: 0, prompt_logprobs: 2 });
	checkCompletion(c, 'completion');
	const plp = c.choices[0].prompt_logprobs;
	ok(Array.isArray(plp) && plp.length === helloIDs.length, `prompt_logprobs is ${JSON.stringify(plp)}, want one entry per prompt token`);
	eq(plp[0], null, 'the first prompt token has none');
	for (let i = 1; i < plp.length; i++) {
		const first = Object.entries(plp[i])[0];
		eq(first[0], String(helloIDs[i]), `position ${i}: the prompt token comes first`);
		ok(isInt(first[1].rank) && first[1].rank >= 1 && first[1].logprob <= 0 && typeof first[1].decoded_token === 'string',
			`position ${i}: ${JSON.stringify(first[1])} is not a {logprob, rank, decoded_token}`);
	}
});

check('completions: penalties steer greedy decoding', async () => {
	const plain = await client.completions.create({ model, prompt, max_tokens: 24, temperature: 0, logprobs: 0 });
	const pen = await client.completions.create({ model, prompt, max_tokens: 24, temperature: 0, frequency_penalty: 2, presence_penalty: 2, logprobs: 0 });
	checkCompletion(pen, 'completion');
	const count = (toks) => Math.max(...Object.values(toks.reduce((m, t) => ({ ...m, [t]: (m[t] ?? 0) + 1 }), {})));
	ok(pen.choices[0].text !== plain.choices[0].text, 'frequency_penalty 2 and presence_penalty 2 changed nothing');
	ok(count(pen.choices[0].logprobs.tokens) <= count(plain.choices[0].logprobs.tokens),
		'the penalized completion repeats its most frequent token more often than the plain one');
});

check('completions: logit_bias', async () => {
	const c = await client.completions.create({ model, prompt, max_tokens: 4, temperature: 0, logit_bias: { '15496': 100 } });
	checkCompletion(c, 'completion');
	eq(c.choices[0].text, 'HelloHelloHelloHello', 'a +100 bias on "Hello" (15496)');
});

// greedyStop returns the greedy 24-token text of prompt and a stop string
// from its middle: a token of plain letters.
async function greedyStop() {
	const full = await client.completions.create({ model, prompt, max_tokens: 24, temperature: 0, logprobs: 0 });
	const toks = full.choices[0].logprobs.tokens;
	const k = toks.findIndex((t, i) => i >= 2 && /^ ?[A-Za-z]{2,}$/.test(t));
	ok(k >= 0, `no token of plain letters in ${JSON.stringify(toks)} to stop on`);
	return { text: full.choices[0].text, stop: toks[k].trim() };
}

check('completions: stop', async () => {
	const { text, stop } = await greedyStop();
	const want = text.slice(0, text.indexOf(stop));
	for (const s of [stop, [stop], ['\u0000never', stop]]) {
		const c = await client.completions.create({ model, prompt, max_tokens: 24, temperature: 0, stop: s });
		checkCompletion(c, `stop ${JSON.stringify(s)}`);
		eq(c.choices[0].text, want, `stop ${JSON.stringify(s)}: text`);
		eq(c.choices[0].finish_reason, 'stop', `stop ${JSON.stringify(s)}: finish_reason`);
		eq(c.choices[0].stop_reason, stop, `stop ${JSON.stringify(s)}: stop_reason (vLLM's)`);
	}
});

check("completions: vLLM's min_p, include_stop_str_in_output, continuous_usage_stats", async () => {
	// Extra fields the SDK's types do not know pass through in the body, as
	// vLLM's docs show for its sampling parameters.
	const { text, stop } = await greedyStop();
	const c = await client.completions.create({
		model, prompt, max_tokens: 24, temperature: 0, stop, include_stop_str_in_output: true, min_p: 0.05,
	});
	checkCompletion(c, 'include_stop_str_in_output');
	eq(c.choices[0].text, text.slice(0, text.indexOf(stop) + stop.length), 'the text ends with the stop string');
	eq(c.choices[0].stop_reason, stop, 'stop_reason');
	const s = await client.completions.create({
		model, prompt, max_tokens: 4, temperature: 0, stream: true,
		stream_options: { include_usage: true, continuous_usage_stats: true },
	});
	const chunks = await collect(s, 'continuous usage');
	// Usage so far on every chunk; merged chunks skip counts, so the counts
	// only grow and end at 4.
	const counts = chunks.slice(0, -1).map((ch) => ch.usage.completion_tokens);
	ok(counts.length >= 1 && counts.every((n, i) => n >= 1 && n <= 4 && (i === 0 || n > counts[i - 1])) && counts.at(-1) === 4,
		`usage so far on every chunk: ${JSON.stringify(counts)}, want increasing counts ending at 4`);
	eq(chunks.at(-1).usage, { prompt_tokens: 5, completion_tokens: 4, total_tokens: 9 }, 'the final usage');
});

check("completions: vLLM's allowed_token_ids, return_tokens_as_token_ids", async () => {
	// Sampled at temperature 1 from GPT-2's tokens for "," (11) and "." (13)
	// alone: every generated token is one of them, and the logprobs name
	// each token by id.
	const c = await client.completions.create({
		model, prompt, max_tokens: 8, seed: 7, allowed_token_ids: [11, 13], logprobs: 1, return_tokens_as_token_ids: true,
		return_token_ids: true,
	});
	checkCompletion(c, 'allowed_token_ids');
	const ids = c.choices[0].token_ids;
	ok(Array.isArray(ids) && ids.length === 8 && ids.every((id) => id === 11 || id === 13), `token_ids ${JSON.stringify(ids)}`);
	eq(c.choices[0].logprobs.tokens, ids.map((id) => `token_id:${id}`), 'logprobs tokens as ids');
	ok(/^[,.]{8}$/.test(c.choices[0].text), `text ${JSON.stringify(c.choices[0].text)}`);
});

check('completions: stream', async () => {
	const s = await client.completions.create({ model, prompt, max_tokens: 12, temperature: 0, stream: true });
	const chunks = await collect(s, 'stream');
	const f = fold(chunks, 'stream');
	eq([...f.keys()], [0], 'choice indices');
	eq(f.get(0).text, greedy12, 'streamed text');
	eq(f.get(0).finish, 'length', 'finish_reason');
	ok(chunks.every((c) => c.choices.length === 1), 'a chunk without exactly one choice');
	ok(chunks.every((c) => !c.usage), 'a chunk carries usage without include_usage');
	// A chunk per token at most: tokens that are ready together while the
	// client reads go out merged in one chunk (docs/server.md, as vLLM's
	// output collector merges them), so a slow reader sees fewer.
	ok(chunks.length >= 1 && chunks.length <= 12, `chunks: ${chunks.length}, want 1 to 12 (at most one per token)`);
});

check('completions: stream with include_usage', async () => {
	// include_obfuscation is in the SDK's type of stream_options; false is what tinyserve does.
	const s = await client.completions.create({
		model, prompt, max_tokens: 12, temperature: 0, stream: true,
		stream_options: { include_usage: true, include_obfuscation: false },
	});
	const chunks = await collect(s, 'stream');
	const last = chunks.at(-1);
	eq(last.choices, [], 'the usage chunk\'s choices');
	checkUsage(last.usage, 'the usage chunk');
	eq(last.usage, { prompt_tokens: 5, completion_tokens: 12, total_tokens: 17 }, 'usage');
	ok(chunks.slice(0, -1).every((c) => c.usage == null), 'usage on a chunk before the last');
	eq(fold(chunks.slice(0, -1), 'stream').get(0).text, greedy12, 'streamed text');
});

check('completions: stream n=2, list of prompts, logprobs, echo', async () => {
	const prompts = [prompt, 'Once upon a time'];
	const s = await client.completions.create({
		model, prompt: prompts, n: 2, seed: 3, temperature: 1, max_tokens: 10, logprobs: 2, stream: true,
		stream_options: { include_usage: true },
	});
	const chunks = await collect(s, 'stream');
	const f = fold(chunks.slice(0, -1), 'stream');
	eq([...f.keys()].sort(), [0, 1, 2, 3], 'choice indices');
	const ns = await client.completions.create({ model, prompt: prompts, n: 2, seed: 3, temperature: 1, max_tokens: 10 });
	for (const ch of ns.choices) {
		eq(f.get(ch.index).text, ch.text, `choice ${ch.index}: streamed text (as not streamed)`);
		eq(f.get(ch.index).tokens.join(''), ch.text, `choice ${ch.index}: streamed logprobs tokens`);
	}
	eq(chunks.at(-1).usage, ns.usage, 'usage (as not streamed)');
	const e = await client.completions.create({ model, prompt, max_tokens: 12, temperature: 0, echo: true, stream: true });
	const ec = await collect(e, 'echo stream');
	ok(ec[0].choices[0].text.startsWith(prompt), 'echo: the first chunk does not start with the prompt');
	eq(fold(ec, 'echo stream').get(0).text, prompt + greedy12, 'echo: streamed text');
});

check('completions: stream with stop', async () => {
	const full = await client.completions.create({ model, prompt, max_tokens: 24, temperature: 0, logprobs: 0 });
	const toks = full.choices[0].logprobs.tokens;
	const k = toks.findIndex((t, i) => i >= 2 && /^ ?[A-Za-z]{2,}$/.test(t));
	ok(k >= 0, `no token of plain letters in ${JSON.stringify(toks)} to stop on`);
	const stop = toks[k].trim();
	const text = full.choices[0].text;
	const s = await client.completions.create({ model, prompt, max_tokens: 24, temperature: 0, stop, stream: true });
	const f = fold(await collect(s, 'stream'), 'stream').get(0);
	eq([f.text, f.finish], [text.slice(0, text.indexOf(stop)), 'stop'], 'streamed text and finish_reason');
});

const ctxMessage = /^This model's maximum context length is \d+ tokens\. However, you requested \d+ tokens \(5 in the prompt, 5000 in the completion\)\./;

check('errors: max_tokens over the context', async () => {
	const want = { status: 400, type: 'invalid_request_error', code: 'context_length_exceeded', param: 'prompt', message: ctxMessage };
	await expectAPIError(() => client.completions.create({ model, prompt, max_tokens: 5000 }), BadRequestError, want, 'non-streaming');
	await expectAPIError(() => client.completions.create({ model, prompt, max_tokens: 5000, stream: true }), BadRequestError, want, 'streaming');
});

check('errors: unknown model', async () => {
	// OpenAI's type and code for an unknown model; the SDK picks NotFoundError from the status.
	const want = { status: 404, type: 'invalid_request_error', code: 'model_not_found', param: 'model', message: /^The model `gpt-4o` does not exist\.$/ };
	await expectAPIError(() => client.completions.create({ model: 'gpt-4o', prompt }), NotFoundError, want, 'non-streaming');
	await expectAPIError(() => client.completions.create({ model: 'gpt-4o', prompt, stream: true }), NotFoundError, want, 'streaming');
});

check('errors: wrong API key', async () => {
	if (!process.env.INTEROP_API_KEY) return; // the server was started without --api-key
	const bad = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'not-the-key', maxRetries: 0 });
	const want = { status: 401, type: 'invalid_request_error', code: 'invalid_api_key', param: null, message: /API key/ };
	await expectAPIError(() => bad.completions.create({ model, prompt }), AuthenticationError, want, 'completions');
	await expectAPIError(() => bad.models.list(), AuthenticationError, want, 'models.list');
});

check('prefix cache: a repeated prompt reports cached_tokens', async () => {
	if (!prefixCaching) return; // the server was started without --enable-prefix-caching
	const long = 'The quick brown fox jumps over the lazy dog.'.repeat(8);
	const n = await promptTokens(long);
	const first = await client.completions.create({ model, prompt: long, max_tokens: 4, temperature: 0 });
	const again = await client.completions.create({ model, prompt: long, max_tokens: 4, temperature: 0 });
	checkUsage(again.usage, 'again');
	eq(again.choices[0].text, first.choices[0].text, 'the cache changes no token');
	eq(again.usage.prompt_tokens, n, 'prompt_tokens');
	// Whole blocks of 16, never the last prompt token.
	eq(again.usage.prompt_tokens_details?.cached_tokens, Math.floor((n - 1) / 16) * 16, 'prompt_tokens_details.cached_tokens');
});

check('errors: negative temperature', async () => {
	const want = { status: 400, type: 'invalid_request_error', code: 'invalid_value', param: 'temperature', message: /temperature/ };
	await expectAPIError(() => client.completions.create({ model, prompt, temperature: -0.5 }), BadRequestError, want, 'temperature -0.5');
});

check('errors: unsupported parameter, penalty out of range', async () => {
	const want = { status: 400, type: 'invalid_request_error', code: 'unsupported_parameter', param: 'suffix', message: /suffix/ };
	await expectAPIError(() => client.completions.create({ model, prompt, suffix: ' and so on' }), BadRequestError, want, 'suffix');
	const pen = { status: 400, type: 'invalid_request_error', code: 'invalid_value', param: 'presence_penalty', message: /\[-2, 2\]/ };
	await expectAPIError(() => client.completions.create({ model, prompt, presence_penalty: 2.5 }), BadRequestError, pen, 'presence_penalty 2.5');
	const obf = { ...want, param: 'stream_options.include_obfuscation', message: /include_obfuscation/ };
	await expectAPIError(() => client.completions.create({
		model, prompt, stream: true, stream_options: { include_obfuscation: true },
	}), BadRequestError, obf, 'stream_options.include_obfuscation true');
});

// afterAbort checks that the server counted one more abort, has nothing
// running, waiting or in the KV cache, is healthy, and still answers.
async function afterAbort(abortsBefore) {
	await waitFor(async () => (await abortCount()) === abortsBefore + 1,
		'vllm:request_success_total{finished_reason="abort"} went up by 1');
	await waitFor(async () => (await metric('vllm:num_requests_running')) === 0, 'vllm:num_requests_running is 0');
	eq(await metric('vllm:num_requests_waiting'), 0, 'vllm:num_requests_waiting');
	eq(await metric('vllm:kv_cache_usage_perc'), 0, 'vllm:kv_cache_usage_perc');
	await healthy('after the abort');
	const c = await client.completions.create({ model, prompt, max_tokens: 12, temperature: 0 });
	eq(c.choices[0].text, greedy12, 'a completion after the abort');
}

const abortCount = () => metric('vllm:request_success_total', 'finished_reason="abort"');

// A request that runs long enough to be aborted: 1000 tokens (ignore_eos is
// vLLM's; the SDK passes fields it does not know through).
const long = () => ({ model, prompt, max_tokens: 1000, temperature: 0, ignore_eos: true });

// abortMidStream starts a long stream, stops it after two chunks with
// stop(ac), and checks that it ends early, without an error other than the
// SDK's APIUserAbortError, and that the server is left clean.
async function abortMidStream(stop) {
	const before = await abortCount();
	const ac = new AbortController();
	const s = await client.completions.create({ ...long(), stream: true }, { signal: ac.signal });
	let n = 0;
	let finished = false;
	let thrown;
	try {
		for await (const c of s) {
			checkCompletion(c, `chunk ${n}`, { chunk: true });
			finished ||= c.choices.some((ch) => ch.finish_reason !== null);
			if (++n === 2 && stop(ac) === 'break') break;
		}
	} catch (e) {
		thrown = e;
	}
	ok(thrown === undefined || thrown instanceof APIUserAbortError,
		`the aborted stream threw ${thrown?.constructor?.name}: ${thrown?.message}, want nothing or APIUserAbortError`);
	// After abort() the SDK still yields the chunks it had already received.
	ok(n >= 2 && !finished, `the stream ran to its end (${n} chunks) despite the abort`);
	await afterAbort(before);
}

check('abort: AbortController mid-stream', async () => {
	await abortMidStream((ac) => ac.abort());
});

check('abort: break out of for await', async () => {
	await abortMidStream(() => 'break');
});

check('abort: AbortController during a non-streamed request', async () => {
	const before = await abortCount();
	const ac = new AbortController();
	const p = client.completions.create(long(), { signal: ac.signal });
	await waitFor(async () => (await metric('vllm:num_requests_running')) === 1, 'the request is running');
	ac.abort();
	let thrown;
	try {
		await p;
	} catch (e) {
		thrown = e;
	}
	ok(thrown instanceof APIUserAbortError, `threw ${thrown?.constructor?.name}: ${thrown?.message}, want APIUserAbortError`);
	await afterAbort(before);
});

// ---- run --------------------------------------------------------------------

const { VERSION } = await import('openai/version');
console.log(`openai-node ${VERSION} (node ${process.version}) against ${base}`);
let failed = 0;
for (const { name, fn } of checks) {
	try {
		await fn();
		console.log(`ok    ${name}`);
	} catch (e) {
		failed++;
		const detail = e instanceof Mismatch ? e.message : `${e?.constructor?.name}: ${e?.message}`;
		console.log(`FAIL  ${name}\n      ${detail}`);
	}
}
console.log(failed ? `${failed} of ${checks.length} checks failed` : `all ${checks.length} checks passed`);
process.exit(failed ? 1 : 0);
