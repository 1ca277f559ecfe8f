package openai

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/mock"
)

const (
	benchConcurrency = 64
	benchBody        = `{"prompt":"hello","max_tokens":1,"temperature":0}`
)

// benchTarget is one server under the benchmark's client.
type benchTarget struct {
	srv    *httptest.Server
	tr     *http.Transport
	client *http.Client
	url    string
}

func newBenchTarget(h http.Handler) *benchTarget {
	srv := httptest.NewServer(h)
	tr := &http.Transport{MaxIdleConns: 2 * benchConcurrency, MaxIdleConnsPerHost: 2 * benchConcurrency}
	return &benchTarget{srv: srv, tr: tr, client: &http.Client{Transport: tr}, url: srv.URL + "/v1/completions"}
}

func (bt *benchTarget) close() {
	bt.tr.CloseIdleConnections()
	bt.srv.Close()
}

func (bt *benchTarget) post(b *testing.B) bool {
	resp, err := bt.client.Post(bt.url, "application/json", strings.NewReader(benchBody))
	if err != nil {
		b.Error(err)
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Errorf("status %d", resp.StatusCode)
		return false
	}
	return true
}

// burst sends n requests from benchConcurrency clients and returns the time
// they took.
func (bt *benchTarget) burst(b *testing.B, n int) time.Duration {
	var left atomic.Int64
	left.Store(int64(n))
	var wg sync.WaitGroup
	start := time.Now()
	for range benchConcurrency {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if !bt.post(b) {
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// bareHandler answers like a completion without doing anything.
func bareHandler() http.Handler {
	fixed := []byte(`{"id":"cmpl-0","object":"text_completion","created":0,"model":"mock","choices":[{"index":0,"text":"a","logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(fixed)
	})
}

// BenchmarkCompletionsVsBare measures requests per second of non-streaming
// completions (max_tokens 1, mock backend without latency, 64 concurrent
// clients over loopback) against a bare net/http handler that returns a
// fixed JSON body, under the same client. "bare" and "tinyserve" report
// req/s alone; "paired" alternates bursts of 512 requests between the two
// servers, so that load from elsewhere on the machine hits both alike, and
// reports ratio_to_bare (the goal is >= 0.5):
//
//	go test -run XXX -bench CompletionsVsBare -benchtime 3s ./openai
func BenchmarkCompletionsVsBare(b *testing.B) {
	newEngine := func(b *testing.B) http.Handler {
		eng, err := mock.NewEngine(mock.Config{}, engine.Config{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = eng.Close() })
		return NewHandler(eng)
	}
	alone := func(b *testing.B, h http.Handler) {
		bt := newBenchTarget(h)
		defer bt.close()
		b.SetParallelism((benchConcurrency + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if !bt.post(b) {
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
	}
	b.Run("bare", func(b *testing.B) { alone(b, bareHandler()) })
	b.Run("tinyserve", func(b *testing.B) { alone(b, newEngine(b)) })
	b.Run("paired", func(b *testing.B) {
		const perBurst = 512
		bare, tiny := newBenchTarget(bareHandler()), newBenchTarget(newEngine(b))
		defer bare.close()
		defer tiny.close()
		bare.burst(b, perBurst) // warm both connection pools
		tiny.burst(b, perBurst)
		var bareT, tinyT time.Duration
		b.ResetTimer()
		for b.Loop() {
			bareT += bare.burst(b, perBurst)
			tinyT += tiny.burst(b, perBurst)
		}
		n := float64(b.N * perBurst)
		b.ReportMetric(n/bareT.Seconds(), "bare_req/s")
		b.ReportMetric(n/tinyT.Seconds(), "tinyserve_req/s")
		b.ReportMetric(bareT.Seconds()/tinyT.Seconds(), "ratio_to_bare")
	})
}

// BenchmarkDecodeWholeNumbers decodes a body whose numbers take the slow
// path of unmarshalWholeNumbers (a 4.0 for an integer, then a thousand
// numbers of huge exponent, each refused by its bytes alone) and, as the
// baseline, a plain body of the same length, and reports the ratio of
// their times: a few, not the thousands that exact arithmetic on 1e999999
// cost.
//
//	go test -run XXX -bench DecodeWholeNumbers ./openai
func BenchmarkDecodeWholeNumbers(b *testing.B) {
	huge := `{"prompt":"a","max_tokens":4.0,"stop_token_ids":[1` + strings.Repeat(",1e999999,-1e-999999", 500) + `]}`
	plain := `{"prompt":"a","max_tokens":4,"stop_token_ids":[1` + strings.Repeat(",1000000,2000000000", 500) + `]}`
	timeOf := func(body string) time.Duration {
		start := time.Now()
		for range 20 {
			_, _ = decodeCompletion([]byte(body))
		}
		return time.Since(start)
	}
	var hugeT, plainT time.Duration
	for b.Loop() {
		plainT += timeOf(plain)
		hugeT += timeOf(huge)
	}
	b.ReportMetric(hugeT.Seconds()/plainT.Seconds(), "ratio_to_plain")
}

// BenchmarkTokenIDs reads a 4 MiB prompt of two million token ids, the
// most a default body holds, with tokenIDs and, in the same loop, with the
// encoding/json decoding it replaced, and reports the ratios of their
// times and of their allocated bytes (0.07 and 0.14 here; for the whole
// request's decoding, 0.12 s and 25 MB against 1.05 s and 398 MB before).
//
//	go test -run XXX -bench TokenIDs -benchtime 5x ./openai
func BenchmarkTokenIDs(b *testing.B) {
	raw := []byte("[1" + strings.Repeat(",1", 2<<20-2) + "]")
	measure := func(read func([]byte) ([]int, *apiError)) (time.Duration, uint64) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		if _, e := read(raw); e != nil {
			b.Fatal(e.Message)
		}
		d := time.Since(start)
		runtime.ReadMemStats(&after)
		return d, after.TotalAlloc - before.TotalAlloc
	}
	var scanT, refT time.Duration
	var scanB, refB uint64
	for b.Loop() {
		t, n := measure(func(r []byte) ([]int, *apiError) { return tokenIDs("p", "p", r) })
		scanT, scanB = scanT+t, scanB+n
		t, n = measure(referenceTokenIDs)
		refT, refB = refT+t, refB+n
	}
	b.ReportMetric(scanT.Seconds()/refT.Seconds(), "time_ratio_to_encoding_json")
	b.ReportMetric(float64(scanB)/float64(refB), "bytes_ratio_to_encoding_json")
}
