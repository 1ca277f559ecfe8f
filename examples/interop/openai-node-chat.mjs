// Chat checks of tinyserve's /v1/chat/completions with the official OpenAI
// Node SDK (npm package "openai"), against a server of a model with a chat
// template (node_test.go serves testdata/qwen3-tiny with the hermes
// tool-call parser and the qwen3 reasoning parser).
//
// Usage: node openai-node-chat.mjs http://127.0.0.1:PORT
//
// Each check prints "ok" or "FAIL" with the mismatch; the exit status is 1
// if any failed.

import OpenAI, { BadRequestError } from 'openai';

const base = process.argv[2];
if (!base) {
	console.error('usage: node openai-node-chat.mjs http://HOST:PORT');
	process.exit(2);
}
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60_000 });

class Mismatch extends Error {}

function ok(cond, what) {
	if (!cond) throw new Mismatch(what);
}

function eq(got, want, what) {
	const g = JSON.stringify(got);
	const w = JSON.stringify(want);
	if (g !== w) throw new Mismatch(`${what}: got ${g}, want ${w}`);
}

const model = (await client.models.list()).data[0].id;
const messages = [
	{ role: 'system', content: 'Be brief.' },
	{ role: 'user', content: 'What is the capital of France?' },
];
// Greedy, a fixed length, and Qwen3's thinking off (a vLLM field the SDK
// passes through in the body).
const greedy = { model, messages, max_tokens: 8, temperature: 0, chat_template_kwargs: { enable_thinking: false } };

const checks = [];
const check = (name, fn) => checks.push({ name, fn });

let whole; // the non-streamed greedy completion
check('chat.completions.create: a ChatCompletion', async () => {
	whole = await client.chat.completions.create(greedy);
	eq(whole.object, 'chat.completion', 'object');
	ok(whole.id.startsWith('chatcmpl-'), `id ${whole.id}`);
	eq(whole.model, model, 'model');
	eq(whole.choices.length, 1, 'choices');
	const c = whole.choices[0];
	eq(c.index, 0, 'index');
	eq(c.message.role, 'assistant', 'role');
	ok(typeof c.message.content === 'string' && c.message.content.length > 0, `content ${JSON.stringify(c.message.content)}`);
	ok(!c.message.tool_calls || c.message.tool_calls.length === 0, 'no tool calls');
	ok(['length', 'stop'].includes(c.finish_reason), `finish_reason ${c.finish_reason}`);
	ok(whole.usage.prompt_tokens > 0 && whole.usage.completion_tokens > 0, `usage ${JSON.stringify(whole.usage)}`);
	eq(whole.usage.total_tokens, whole.usage.prompt_tokens + whole.usage.completion_tokens, 'total_tokens');
});

check('stream: role first, the same content, usage last', async () => {
	const stream = await client.chat.completions.create({ ...greedy, stream: true, stream_options: { include_usage: true } });
	let content = '';
	let first = true;
	let finish = null;
	let usage = null;
	for await (const chunk of stream) {
		eq(chunk.object, 'chat.completion.chunk', 'object');
		if (chunk.usage) usage = chunk.usage;
		if (chunk.choices.length === 0) continue;
		const d = chunk.choices[0].delta;
		if (first) {
			eq(d.role, 'assistant', 'the first delta\'s role');
			first = false;
		}
		content += d.content ?? '';
		if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
	}
	eq(content, whole.choices[0].message.content, 'streamed content');
	eq(finish, whole.choices[0].finish_reason, 'finish_reason');
	eq(usage, whole.usage, 'usage');
});

check('chat.completions.stream helper: finalChatCompletion', async () => {
	const runner = client.chat.completions.stream(greedy);
	let deltas = '';
	runner.on('content', (delta) => {
		deltas += delta;
	});
	const final = await runner.finalChatCompletion();
	eq(final.choices[0].message.content, whole.choices[0].message.content, 'final content');
	eq(deltas, whole.choices[0].message.content, 'content events');
});

check('tools with tool_choice none reach the template, content comes back', async () => {
	const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
	const c = await client.chat.completions.create({ ...greedy, tools, tool_choice: 'none' });
	ok(c.usage.prompt_tokens > whole.usage.prompt_tokens, `the tools were not rendered: ${c.usage.prompt_tokens} prompt tokens, ${whole.usage.prompt_tokens} without`);
	ok(!c.choices[0].message.tool_calls || c.choices[0].message.tool_calls.length === 0, 'no tool calls');
});

check('n and seed: reproducible samples', async () => {
	const p = { model, messages, max_tokens: 6, temperature: 1, seed: 7, n: 2, chat_template_kwargs: { enable_thinking: false } };
	const a = await client.chat.completions.create(p);
	const b = await client.chat.completions.create(p);
	eq(a.choices.length, 2, 'choices');
	eq(a.choices.map((c) => c.message.content), b.choices.map((c) => c.message.content), 'the same seed');
});

check('logprobs in the chat format', async () => {
	const c = await client.chat.completions.create({ ...greedy, logprobs: true, top_logprobs: 2 });
	const lp = c.choices[0].logprobs.content;
	eq(lp.length, c.usage.completion_tokens, 'one entry per token');
	eq(lp.map((e) => e.token).join(''), c.choices[0].message.content, 'tokens joined');
	for (const e of lp) {
		ok(e.logprob <= 0 && e.top_logprobs.length === 2, `entry ${JSON.stringify(e)}`);
		ok(Array.isArray(e.bytes), 'bytes');
	}
});

check('an image part: BadRequestError naming it', async () => {
	let thrown;
	try {
		await client.chat.completions.create({ model, messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://x/y.png' } }] }] });
	} catch (e) {
		thrown = e;
	}
	ok(thrown instanceof BadRequestError, `threw ${thrown?.constructor?.name}, want BadRequestError`);
	ok(thrown.message.includes('image_url'), `message ${thrown.message}`);
});

const { VERSION } = await import('openai/version');
console.log(`openai-node ${VERSION} (node ${process.version}) chat against ${base}`);
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
