package openai

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/mock"
)

// counterValue is the value of an unlabelled (but for model_name) counter
// or gauge, 0 when absent.
func counterValue(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) != 1 {
			continue
		}
		m := mf.GetMetric()[0]
		if m.GetCounter() != nil {
			return m.GetCounter().GetValue()
		}
		return m.GetGauge().GetValue()
	}
	return 0
}

// hostileClient is one client of TestHostileClientsLeaveNothingBehind: it
// sends its request and walks away at the moment its kind says.
type hostileClient struct {
	kind   int
	prompt string
	n      int
	max    int
	quitAt int           // stream lines to read before hanging up
	wait   time.Duration // how long a timing-out client waits
}

const (
	hostileStreamEarly  = iota // hangs up as soon as the headers arrive, or before
	hostileStreamMid           // hangs up after quitAt lines
	hostileStreamAtDone        // reads up to [DONE] and hangs up at once
	hostileStreamN             // n > 1, hangs up after quitAt lines
	hostileJSONTimeout         // non-streamed, gives up after wait
	hostileJSONComplete        // non-streamed, waits for the answer
	numHostileKinds
)

func (c hostileClient) run(t *testing.T, ms *mockServer) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := c.kind != hostileJSONTimeout && c.kind != hostileJSONComplete
	body := fmt.Sprintf(`{"prompt":%q,"max_tokens":%d,"n":%d,"top_k":1,"stream":%v}`, c.prompt, c.max, c.n, stream)
	switch c.kind {
	case hostileJSONTimeout:
		ctx, cancel = context.WithTimeout(ctx, c.wait)
		defer cancel()
	case hostileStreamEarly:
		if c.wait > 0 {
			time.AfterFunc(c.wait, cancel)
		}
	}
	resp, err := ms.post(ctx, "/v1/completions", body)
	if err != nil {
		return // gone before the answer
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusTooManyRequests {
		// A hung-up client's handler may hold its admission slot a moment
		// longer than the client: the next one can find the bound full.
		return
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Errorf("client %+v: %d %s", c, resp.StatusCode, b)
		return
	}
	switch c.kind {
	case hostileStreamEarly:
		return
	case hostileStreamMid, hostileStreamN:
		br := bufio.NewReader(resp.Body)
		for range c.quitAt {
			if _, err := br.ReadString('\n'); err != nil {
				return
			}
		}
	case hostileStreamAtDone:
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Errorf("stream cut before [DONE]: %v", err)
				return
			}
			if line == "data: [DONE]\n" {
				return
			}
		}
	default:
		_, _ = io.ReadAll(resp.Body)
	}
}

// TestHostileClientsLeaveNothingBehind runs many concurrent clients on the
// real engine (mock backend, a pool small enough to preempt) that walk away
// at every moment: before their stream's first token, mid-stream, right at
// [DONE], n > 1 choices mid-way, non-streamed ones timing out. Once they are
// gone the server must be as it started: no KV block held, the running and
// waiting gauges at 0, every choice counted once in
// vllm:request_success_total, no goroutine left (while the engine and the
// server still run: closing them would hide a leak), and every admission
// slot back (a burst of exactly max-pending requests is admitted whole).
func TestHostileClientsLeaveNothingBehind(t *testing.T) {
	for _, prefix := range []bool{false, true} {
		t.Run(fmt.Sprintf("prefix_caching=%v", prefix), func(t *testing.T) {
			verifyNoLeak(t)
			const maxPending = 48
			reg := prometheus.NewRegistry()
			mcfg := mock.Config{Latency: mock.Latency{PerStep: 200 * time.Microsecond}}
			ms := newMockServer(t, mcfg, engine.Config{
				MaxNumSeqs: 8, MaxNumBatchedTokens: 64, BlockSize: 4, NumBlocks: 40,
				MaxPending: maxPending, PrefixCaching: prefix,
			}, WithMaxPending(maxPending), WithRegistry(reg, reg))
			ms.client.Transport.(*http.Transport).MaxIdleConnsPerHost = maxPending
			before := goleak.IgnoreCurrent()

			rng := rand.New(rand.NewPCG(11, 12))
			var clients []hostileClient
			for i := range 160 {
				c := hostileClient{kind: rng.IntN(numHostileKinds), n: 1, max: 4 + rng.IntN(40)}
				// Shared heads give the prefix cache something to share.
				c.prompt = fmt.Sprintf("%s client %d", strings.Repeat("shared head ", 1+i%3), i)
				c.quitAt = rng.IntN(2 * c.max)
				c.wait = time.Duration(rng.IntN(3000)) * time.Microsecond
				if c.kind == hostileStreamN {
					c.n = 2 + rng.IntN(3)
				}
				clients = append(clients, c)
			}
			// At most 8 clients of at most 4 choices each: the bound is
			// seldom reached, so nearly every client is admitted.
			slots := make(chan struct{}, 8)
			var wg sync.WaitGroup
			for _, c := range clients {
				slots <- struct{}{}
				wg.Go(func() {
					defer func() { <-slots }()
					c.run(t, ms)
				})
			}
			wg.Wait()

			require.Eventually(t, func() bool {
				s := ms.eng.Stats()
				return s.Running == 0 && s.Waiting == 0 && s.KVBlocksUsed == 0
			}, 5*time.Second, time.Millisecond, "engine not idle: %+v", ms.eng.Stats())
			s := ms.eng.Stats()
			assert.Positive(t, s.Preemptions, "the pool must be small enough to preempt")
			// Every engine request is one choice of one HTTP request, so the
			// handler's success counts (bumped as each handler returns) add up
			// to the engine's finished requests.
			total := func() float64 {
				return finishedCount(t, reg, "stop") + finishedCount(t, reg, "length") + finishedCount(t, reg, "abort")
			}
			require.Eventually(t, func() bool { return total() == float64(s.Finished) }, 5*time.Second, time.Millisecond,
				"request_success_total sums to %v, the engine finished %d", total(), s.Finished)
			assert.Positive(t, finishedCount(t, reg, "abort"))
			assert.Positive(t, finishedCount(t, reg, "length"))
			t.Logf("finished %d (abort %v, length %v), preemptions %d", s.Finished,
				finishedCount(t, reg, "abort"), finishedCount(t, reg, "length"), s.Preemptions)
			for _, g := range []string{"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"} {
				assert.Zero(t, counterValue(t, reg, g), g)
			}

			ms.client.CloseIdleConnections()
			goleak.VerifyNone(t, before)

			// Every admission slot is back: exactly maxPending requests at
			// once are all admitted, by the handler and by the engine.
			statuses := make([]int, maxPending)
			start := make(chan struct{})
			for i := range maxPending {
				wg.Go(func() {
					<-start
					resp, err := ms.post(context.Background(), "/v1/completions",
						fmt.Sprintf(`{"prompt":"burst %d","max_tokens":1}`, i))
					if !assert.NoError(t, err) {
						return
					}
					_, _ = io.ReadAll(resp.Body)
					resp.Body.Close()
					statuses[i] = resp.StatusCode
				})
			}
			close(start)
			wg.Wait()
			for i, st := range statuses {
				assert.Equal(t, http.StatusOK, st, "burst request %d", i)
			}
			ms.close()
		})
	}
}

// TestTokenCountersMatchWhatClientsReceived: vllm:prompt_tokens_total and
// vllm:generation_tokens_total grow by exactly what the responses' usage
// says the clients got (a prompt counted once per choice by the engine),
// and vllm:request_success_total by one per choice, streamed or not, with
// n > 1 and several prompts, even on a pool small enough to preempt (a
// recomputed prefill is not counted again).
func TestTokenCountersMatchWhatClientsReceived(t *testing.T) {
	verifyNoLeak(t)
	reg := prometheus.NewRegistry()
	ms := newMockServer(t, mock.Config{}, engine.Config{MaxNumSeqs: 8, BlockSize: 4, NumBlocks: 24},
		WithRegistry(reg, reg))
	var wg sync.WaitGroup
	var mu sync.Mutex
	wantPrompt, wantGen, wantChoices := 0, 0, 0
	for i := range 24 {
		wg.Go(func() {
			prompts := []string{fmt.Sprintf("tokens %d", i), fmt.Sprintf("and more tokens %d", i)}[:1+i%2]
			n := 1 + i%3
			stream := i%2 == 0
			pj, _ := json.Marshal(prompts)
			body := fmt.Sprintf(`{"prompt":%s,"max_tokens":%d,"n":%d,"top_k":1,"stream":%v,"stream_options":%s}`,
				pj, 5+i, n, stream, map[bool]string{true: `{"include_usage":true}`, false: "null"}[stream])
			resp, err := ms.post(context.Background(), "/v1/completions", body)
			if !assert.NoError(t, err) {
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !assert.Equal(t, 200, resp.StatusCode, "%s", b) {
				return
			}
			_, u := parseAny(t, b)
			promptTokens := 0
			for _, p := range prompts {
				promptTokens += len(p)
			}
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, promptTokens, u[0], "usage counts each prompt once")
			wantPrompt += promptTokens * n // the engine prefills each choice
			wantGen += u[1]
			wantChoices += len(prompts) * n
		})
	}
	wg.Wait()
	require.Eventually(t, func() bool { return finishedCount(t, reg, "length") == float64(wantChoices) },
		5*time.Second, time.Millisecond, "length %v, want %d", finishedCount(t, reg, "length"), wantChoices)
	assert.Zero(t, finishedCount(t, reg, "abort")+finishedCount(t, reg, "stop"))
	assert.Equal(t, float64(wantPrompt), counterValue(t, reg, "vllm:prompt_tokens_total"))
	assert.Equal(t, float64(wantGen), counterValue(t, reg, "vllm:generation_tokens_total"))
	assert.Positive(t, ms.eng.Stats().Preemptions, "the pool must be small enough to preempt")
	ms.close()
}

// TestCloseWhileInFlight: closing the engine under running and queued
// requests ends each as the docs say a closed engine ends it, instead of
// hanging: a stream with an error event (code engine_closed) and [DONE], a
// non-streamed request with a 503 carrying the same code, n > 1 included;
// /health then says closed and a new request gets the same 503.
func TestCloseWhileInFlight(t *testing.T) {
	verifyNoLeak(t)
	reg := prometheus.NewRegistry()
	mcfg := mock.Config{Latency: mock.Latency{PerStep: time.Millisecond}}
	ms := newMockServer(t, mcfg, engine.Config{MaxNumSeqs: 3}, WithRegistry(reg, reg))
	type result struct {
		stream bool
		status int
		body   string
	}
	bodies := []string{
		`{"prompt":"a","max_tokens":3000,"temperature":0,"stream":true}`,
		`{"prompt":"b","max_tokens":3000,"top_k":1,"stream":true,"n":2}`,
		`{"prompt":"c","max_tokens":3000,"temperature":0}`,
		`{"prompt":"d","max_tokens":3000,"top_k":1,"n":2}`,
		`{"prompt":["e","f"],"max_tokens":3000,"temperature":0,"stream":true}`,
	}
	results := make(chan result, len(bodies))
	for _, body := range bodies {
		go func() {
			resp, err := ms.post(context.Background(), "/v1/completions", body)
			if err != nil {
				results <- result{body: err.Error()}
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			results <- result{stream: strings.Contains(body, `"stream":true`), status: resp.StatusCode, body: string(b)}
		}()
	}
	// 8 choices: 3 run, 5 wait.
	require.Eventually(t, func() bool { s := ms.eng.Stats(); return s.Running == 3 && s.Waiting == 5 },
		5*time.Second, time.Millisecond, "%+v", ms.eng.Stats())
	require.NoError(t, ms.eng.Close())

	for range bodies {
		var r result
		select {
		case r = <-results:
		case <-time.After(5 * time.Second):
			t.Fatal("a request still hangs after Close")
		}
		if r.stream {
			require.Equal(t, 200, r.status, r.body)
			evs := sseEvents(t, r.body)
			require.GreaterOrEqual(t, len(evs), 2, r.body)
			assert.Equal(t, "[DONE]", evs[len(evs)-1])
			assert.Contains(t, evs[len(evs)-2], `"code":"engine_closed"`)
		} else {
			assert.Equal(t, 503, r.status, r.body)
			assert.Contains(t, r.body, `"code":"engine_closed"`)
		}
	}

	resp, err := ms.client.Get(ms.srv.URL + "/health")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 503, resp.StatusCode)
	assert.Contains(t, string(b), `"status":"closed"`)
	resp, err = ms.post(context.Background(), "/v1/completions", `{"prompt":"late","max_tokens":1}`)
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 503, resp.StatusCode)
	assert.Contains(t, string(b), `"code":"engine_closed"`)

	// Every choice ended once, as an abort.
	require.Eventually(t, func() bool { return finishedCount(t, reg, "abort") == 8 }, 5*time.Second, time.Millisecond,
		"abort %v, want 8", finishedCount(t, reg, "abort"))
	assert.Zero(t, finishedCount(t, reg, "length")+finishedCount(t, reg, "stop"))
	s := ms.eng.Stats()
	assert.Zero(t, s.Running+s.Waiting+s.KVBlocksUsed, "%+v", s)
	ms.close()
}
