package openai

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/mock"
)

// BenchmarkCompletionsVsBare measures requests per second of non-streaming
// completions (max_tokens 1, mock backend without latency, 64 concurrent
// clients over loopback) and of a bare net/http handler that returns a
// fixed JSON body, under the same client. The tinyserve sub-benchmark
// reports ratio_to_bare when the bare one ran first (the goal is >= 0.5):
//
//	go test -run XXX -bench CompletionsVsBare -benchtime 3s ./openai
func BenchmarkCompletionsVsBare(b *testing.B) {
	const concurrency = 64
	const body = `{"prompt":"hello","max_tokens":1,"temperature":0}`
	var bareRPS float64

	run := func(b *testing.B, h http.Handler) float64 {
		srv := httptest.NewServer(h)
		defer srv.Close()
		tr := &http.Transport{MaxIdleConns: 2 * concurrency, MaxIdleConnsPerHost: 2 * concurrency}
		defer tr.CloseIdleConnections()
		client := &http.Client{Transport: tr}
		url := srv.URL + "/v1/completions"
		b.SetParallelism((concurrency + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				resp, err := client.Post(url, "application/json", strings.NewReader(body))
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Errorf("status %d", resp.StatusCode)
					return
				}
			}
		})
		rps := float64(b.N) / time.Since(start).Seconds()
		b.ReportMetric(rps, "req/s")
		return rps
	}

	b.Run("bare", func(b *testing.B) {
		fixed := []byte(`{"id":"cmpl-0","object":"text_completion","created":0,"model":"mock","choices":[{"index":0,"text":"a","logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`)
		bareRPS = run(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(fixed)
		}))
	})
	b.Run("tinyserve", func(b *testing.B) {
		eng, err := mock.NewEngine(mock.Config{}, engine.Config{})
		if err != nil {
			b.Fatal(err)
		}
		defer eng.Close()
		rps := run(b, NewHandler(eng))
		if bareRPS > 0 {
			b.ReportMetric(rps/bareRPS, "ratio_to_bare")
		}
	})
}
