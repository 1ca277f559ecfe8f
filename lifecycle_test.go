package tinyserve

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tinyserve/tinyserve/llm"

	"go.uber.org/goleak"

	"github.com/tinyserve/tinyserve/openai"
)

// TestCPUBackendHostileClients runs the built-in tiny-gpt2 on the CPU
// behind the OpenAI handler, with a pool small enough to preempt, under
// concurrent clients that hang up at random points (before the first token,
// mid-stream, at [DONE]; n > 1; non-streamed ones timing out), then closes
// the engine under a last wave of streams. Nothing may hang, the engine
// must end idle with every block free, no goroutine may be left, and the
// closed streams end with engine_closed and [DONE].
func TestCPUBackendHostileClients(t *testing.T) {
	before := goleak.IgnoreCurrent()
	eng, err := Open(context.Background(), Config{MaxNumSeqs: 6, BlockSize: 4, NumBlocks: 24, MaxPending: 64, Seed: new(uint64(1)), Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(openai.NewHandler(eng))
	client := srv.Client()
	post := func(ctx context.Context, body string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/completions", strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		return client.Do(req)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var wg sync.WaitGroup
	slots := make(chan struct{}, 8)
	for i := range 30 {
		kind := rng.IntN(5)
		quitAt := rng.IntN(30)
		wait := time.Duration(rng.IntN(20)) * time.Millisecond
		n := 1 + rng.IntN(3)
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stream := kind != 4
			if kind == 4 {
				ctx, cancel = context.WithTimeout(ctx, wait)
				defer cancel()
			}
			body := fmt.Sprintf(`{"prompt":"The number %d is","max_tokens":16,"n":%d,"ignore_eos":true,"stream":%v}`, i, n, stream)
			resp, err := post(ctx, body)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				t.Errorf("%d %s", resp.StatusCode, b)
				return
			}
			br := bufio.NewReader(resp.Body)
			switch kind {
			case 0: // gone before reading anything
			case 1, 2:
				for range quitAt {
					if _, err := br.ReadString('\n'); err != nil {
						return
					}
				}
			default:
				_, _ = io.ReadAll(br)
			}
		})
	}
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for s := eng.Stats(); s.Running != 0 || s.Waiting != 0 || s.KVBlocksUsed != 0; s = eng.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("engine not idle: %+v", s)
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("stats %+v", eng.Stats())

	// A last wave, closed under the clients' feet: Close comes once all six
	// are in the engine and have generated, each long enough (90 tokens,
	// nearly the whole pool: they take turns) that none can finish first.
	results := make(chan string, 6)
	for i := range 6 {
		go func() {
			resp, err := post(context.Background(), fmt.Sprintf(`{"prompt":"late %d","max_tokens":90,"ignore_eos":true,"stream":true}`, i))
			if err != nil {
				results <- err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			results <- string(b)
		}()
	}
	generated := eng.Stats().GenerationTokens
	inEngine := func(s llm.Stats) bool { return s.Running+s.Waiting == 6 && s.GenerationTokens >= generated+6 }
	for deadline := time.Now().Add(10 * time.Second); !inEngine(eng.Stats()); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the last wave never ran: %+v", eng.Stats())
		}
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	for range 6 {
		select {
		case r := <-results:
			if !strings.Contains(r, `"code":"engine_closed"`) || !strings.HasSuffix(r, "data: [DONE]\n\n") {
				t.Errorf("a stream cut by Close ended %q", r[max(0, len(r)-200):])
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a stream still hangs after Close")
		}
	}
	client.CloseIdleConnections()
	srv.Close()
	goleak.VerifyNone(t, before)
}
