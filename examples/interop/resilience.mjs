// What the official OpenAI Node SDK (npm package "openai") does with
// tinyserve's overload and shutdown answers: the checks openai-node.mjs cannot
// do against one healthy server. run.sh runs it after openai-node.mjs.
//
// Usage: node resilience.mjs path/to/tinyserve-serve
//
// It starts its own servers (the built-in gpt2-124m-random on the CPU, on
// ports the OS picks) and kills them when it exits, also on a failure:
//   - bounded (--max-num-seqs 1 --max-pending 1): with one request running
//     and one waiting, a third gets a 429 (RateLimitError, rate_limit_exceeded,
//     Retry-After: 1, the connection kept); with maxRetries 0 the SDK throws
//     it, with retries it waits Retry-After's second and then succeeds; n
//     above --max-pending is a 400 the SDK does not retry.
//   - drain (--drain-timeout 60s): SIGTERM while a request runs; new requests
//     get a 503 (InternalServerError, code draining) with Connection: close.
//     The SDK retries a 503 at once, and would reuse its pooled keep-alive
//     connection: behind a connection-level balancer (a Kubernetes Service)
//     its retries could then never leave the draining replica. So a 503
//     closes its connection, and a counting TCP proxy here checks that each
//     of the SDK's attempts came on a connection of its own. Once the running
//     request is aborted the drain ends and the server exits 0.
//   - cut (--drain-timeout 1s): a 400 found after a stream started
//     (allowed_token_ids leaving no token) arrives as an error event, which
//     the SDK throws as an APIError with its type, code and param; SIGTERM
//     during a long stream ends it, when the drain timeout expires, with an
//     engine_closed error event, an APIError too; the server exits 0.
// Each check prints "ok" or "FAIL" with the mismatch; the exit status is 1 if
// any failed. 10 to 20 s on a 2-core machine.

import { spawn } from 'node:child_process';
import net from 'node:net';
import OpenAI, { APIError, BadRequestError, InternalServerError, RateLimitError } from 'openai';

const bin = process.argv[2];
if (!bin) {
	console.error('usage: node resilience.mjs path/to/tinyserve-serve');
	process.exit(2);
}
const model = 'gpt2-124m-random'; // slow enough on a CPU that a request holds the engine
const prompt = 'The quick brown fox';

// ---- servers ----------------------------------------------------------------

const servers = [];
process.on('exit', () => {
	for (const s of servers) if (s.exitCode === null && s.signalCode === null) s.kill('SIGKILL');
});
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(130));

// start runs the server with args on a free loopback port and resolves, once
// /health answers 200, to {proc, base, exited, log()}.
async function start(name, args) {
	const proc = spawn(bin, ['--model', model, ...args, '--host', '127.0.0.1', '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
	servers.push(proc);
	let log = '';
	proc.stdout.on('data', (d) => (log += d));
	proc.stderr.on('data', (d) => (log += d));
	proc.on('error', (e) => (log += `${e.message}\n`)); // no such binary, say
	const exited = new Promise((res) => proc.on('exit', (code, signal) => res({ code, signal })));
	const s = { name, proc, exited, log: () => log };
	for (let i = 0; i < 1200 && !s.base; i++) {
		await sleep(50);
		const m = /msg=listening addr=(\S+)/.exec(log);
		if (m) s.base = `http://${m[1]}`;
		else if (proc.exitCode !== null || proc.pid === undefined) break;
	}
	if (!s.base) throw new Error(`${name}: the server did not report its address:\n${log}`);
	await waitFor(async () => (await fetch(`${s.base}/health`)).status === 200, `${name}: /health is 200`);
	return s;
}

// proxy forwards TCP connections to base's port; conns lists, per
// connection, how many completion requests it carried so far.
async function proxy(base) {
	const port = Number(new URL(base).port);
	const conns = [];
	const srv = net.createServer((sock) => {
		const c = { text: '', get posts() { return this.text.split('POST /v1/completions ').length - 1; } };
		conns.push(c);
		const up = net.connect(port, '127.0.0.1');
		sock.on('data', (d) => (c.text += d.toString('latin1')));
		sock.pipe(up);
		up.pipe(sock);
		sock.on('error', () => up.destroy());
		up.on('error', () => sock.destroy());
	});
	await new Promise((res) => srv.listen(0, '127.0.0.1', res));
	return { base: `http://127.0.0.1:${srv.address().port}`, conns, close: () => srv.close() };
}

// ---- assertions and helpers -----------------------------------------------------

class Mismatch extends Error {}
function ok(cond, what) {
	if (!cond) throw new Mismatch(what);
}
function eq(got, want, what) {
	const g = JSON.stringify(got), w = JSON.stringify(want);
	if (g !== w) throw new Mismatch(`${what}: got ${g}, want ${w}`);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(cond, what, ms = 60_000) {
	const end = Date.now() + ms;
	while (Date.now() < end) {
		if (await cond().catch(() => false)) return;
		await sleep(20);
	}
	throw new Mismatch(`${what}: not so after ${ms} ms`);
}

// header reads a response header of an APIError: a Headers object from
// openai 5 on, a plain object in 4.
const header = (h, k) => (typeof h?.get === 'function' ? h.get(k) : h?.[k]) ?? null;

// caught runs fn and returns what it threw (undefined if nothing).
async function caught(fn) {
	try {
		await fn();
	} catch (e) {
		return e;
	}
}

// expectAPIError checks that err is an instance of klass with these fields.
function expectAPIError(err, klass, want, what) {
	ok(err instanceof klass, `${what}: threw ${err?.constructor?.name ?? 'nothing'}: ${err?.message}, want ${klass.name}`);
	for (const [k, v] of Object.entries(want)) {
		if (v instanceof RegExp) ok(v.test(err[k]), `${what}: ${k} ${JSON.stringify(err[k])} does not match ${v}`);
		else eq(err[k], v, `${what}: ${k}`);
	}
	return err;
}

async function metric(base, name) {
	const text = await (await fetch(`${base}/metrics`)).text();
	let sum = 0;
	for (const line of text.split('\n')) if (line.startsWith(name + '{')) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
	return sum;
}
const running = (base) => metric(base, 'vllm:num_requests_running');
const waiting = (base) => metric(base, 'vllm:num_requests_waiting');

const client = (base, maxRetries, opts = {}) => new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries, timeout: 60_000, ...opts });
// hold starts a request that keeps the engine busy until it is aborted.
function hold(c, extra = {}) {
	const ac = new AbortController();
	const done = c.completions.create({ model, prompt, max_tokens: 1000, ignore_eos: true, ...extra }, { signal: ac.signal }).catch(() => {});
	return { abort: () => ac.abort(), done };
}

// ---- the checks -------------------------------------------------------------

const checks = [];
const check = (name, fn) => checks.push({ name, fn });
let bounded, drain, cut; // the servers, started below

check('429: RateLimitError with Retry-After, then the SDK retries after it and succeeds', async () => {
	const c0 = client(bounded.base, 0);
	const a = hold(c0); // runs (--max-num-seqs 1)
	await waitFor(async () => (await running(bounded.base)) === 1, 'the first request is running');
	const b = hold(c0); // waits (--max-pending 1)
	await waitFor(async () => (await waiting(bounded.base)) === 1, 'the second request is waiting');
	try {
		const err = expectAPIError(await caught(() => c0.completions.create({ model, prompt, max_tokens: 2 })), RateLimitError,
			{ status: 429, type: 'rate_limit_error', code: 'rate_limit_exceeded' }, 'maxRetries 0');
		eq(header(err.headers, 'retry-after'), '1', 'Retry-After');
		ok(header(err.headers, 'connection') !== 'close', 'a 429 closes its connection; retrying here is what it asks for');
		// With retries: once the first attempt has its 429, the held requests
		// end, so the retry the SDK sends after Retry-After's second is admitted.
		const attempts = [];
		const retrying = client(bounded.base, 3, {
			fetch: async (url, init) => {
				const sent = Date.now();
				const r = await fetch(url, init);
				attempts.push({ sent, got: Date.now(), status: r.status });
				if (r.status === 429) [b, a].forEach((h) => h.abort());
				return r;
			},
		});
		const c = await retrying.completions.create({ model, prompt, max_tokens: 2 });
		eq(c.usage.completion_tokens, 2, 'the retried completion\'s usage.completion_tokens');
		eq(attempts.map((x) => x.status), [429, 200], 'the attempts\' statuses');
		const gap = attempts[1].sent - attempts[0].got;
		console.log(`      the retry went ${gap} ms after the 429`);
		ok(gap >= 950 && gap < 1500, `the retry went ${gap} ms after the 429, want Retry-After's 1 s`);
	} finally {
		[b, a].forEach((h) => h.abort());
		await Promise.all([a.done, b.done]);
	}
});

check('429 bound: n above --max-pending is a 400 the SDK does not retry', async () => {
	await waitFor(async () => (await running(bounded.base)) + (await waiting(bounded.base)) === 0, 'the server is idle');
	const t0 = Date.now();
	expectAPIError(await caught(() => client(bounded.base, 2).completions.create({ model, prompt, n: 2, max_tokens: 2 })), BadRequestError,
		{ status: 400, type: 'invalid_request_error', param: 'n' }, 'n=2');
	ok(Date.now() - t0 < 400, `it took ${Date.now() - t0} ms: retried?`);
});

let held; // the request the drain server is draining
let via; // a counting proxy to the drain server
let cr; // a client with retries, through via

check('drain: new requests get 503 draining with Connection: close', async () => {
	via = await proxy(drain.base);
	// One completion through the proxy first, so the retrying client has a
	// pooled keep-alive connection when the drain starts.
	cr = client(via.base, 2);
	await cr.completions.create({ model, prompt, max_tokens: 1 });
	held = hold(client(drain.base, 0), { n: 8 });
	await waitFor(async () => (await running(drain.base)) > 0, 'the held request is running');
	drain.proc.kill('SIGTERM');
	await waitFor(async () => (await fetch(`${drain.base}/health`)).status === 503, '/health is 503 after SIGTERM', 10_000);
	const err = expectAPIError(await caught(() => client(drain.base, 0).completions.create({ model, prompt, max_tokens: 2 })),
		InternalServerError, { status: 503, type: 'service_unavailable_error', code: 'draining' }, 'maxRetries 0');
	eq(header(err.headers, 'connection'), 'close', 'the 503\'s Connection header');
});

check('drain: the SDK retries the 503 twice, each attempt on a new connection', async () => {
	ok(held, 'the drain did not start');
	const before = via.conns.map((c) => c.posts);
	expectAPIError(await caught(() => cr.completions.create({ model, prompt, max_tokens: 2 })), InternalServerError,
		{ status: 503, code: 'draining' }, 'maxRetries 2');
	const per = via.conns.map((c, i) => c.posts - (before[i] ?? 0)).filter((n) => n > 0);
	console.log(`      attempts per connection: ${JSON.stringify(per)}; ${via.conns.length - before.length} of them new`);
	eq(per, [1, 1, 1], 'completion requests per connection during the call (3 attempts, each on its own)');
});

check('drain: once the running request is aborted, the server exits 0', async () => {
	ok(held, 'the drain did not start');
	held.abort();
	via?.close();
	eq(await Promise.race([drain.exited, sleep(30_000).then(() => 'still running')]), { code: 0, signal: null }, 'exit');
});

check('error event after a stream started: allowed_token_ids leaving no token', async () => {
	// min_tokens masks EOS, the only allowed token: no token is left at the
	// first step, after the stream's 200 went out.
	const body = { model, prompt, max_tokens: 4, allowed_token_ids: [50256], min_tokens: 2 };
	const want = { type: 'invalid_request_error', code: 'invalid_value', param: 'allowed_token_ids', message: /no token may follow/ };
	const c = client(cut.base, 0);
	expectAPIError(await caught(() => c.completions.create(body)), BadRequestError, { status: 400, ...want }, 'non-streamed');
	let n = 0;
	const err = await caught(async () => {
		for await (const _ of await c.completions.create({ ...body, stream: true })) n++;
	});
	expectAPIError(err, APIError, { status: undefined, ...want }, `streamed (after ${n} chunks)`);
});

check('drain timeout mid-stream: an engine_closed error event, then the server exits 0', async () => {
	const s = await client(cut.base, 0).completions.create({ model, prompt, n: 4, max_tokens: 1000, ignore_eos: true, stream: true });
	let n = 0;
	let finished = false;
	const err = await caught(async () => {
		for await (const ch of s) {
			finished ||= ch.choices.some((x) => x.finish_reason !== null);
			if (++n === 2) cut.proc.kill('SIGTERM'); // --drain-timeout 1s
		}
	});
	ok(n >= 2 && !finished, `the stream finished (${n} chunks) before the drain timeout; it must outlast 1 s`);
	expectAPIError(err, APIError, { status: undefined, type: 'service_unavailable_error', code: 'engine_closed', message: /engine is closed/ },
		`the stream (after ${n} chunks)`);
	eq(await Promise.race([cut.exited, sleep(30_000).then(() => 'still running')]), { code: 0, signal: null }, 'exit');
});

// ---- run --------------------------------------------------------------------

const { VERSION } = await import('openai/version');
console.log(`openai-node ${VERSION} (node ${process.version}): resilience checks against ${bin}`);
[bounded, drain, cut] = await Promise.all([
	start('bounded', ['--max-num-seqs', '1', '--max-pending', '1']),
	start('drain', ['--drain-timeout', '60s']),
	start('cut', ['--drain-timeout', '1s']),
]);
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
if (failed) {
	for (const s of [bounded, drain, cut]) console.log(`---- ${s.name} server's log (last lines)\n${s.log().trimEnd().split('\n').slice(-8).join('\n')}`);
}
console.log(failed ? `${failed} of ${checks.length} checks failed` : `all ${checks.length} checks passed`);
process.exit(failed ? 1 : 0);
