package tinyserve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"

	"github.com/tinyserve/tinyserve/openai"
)

// liveHeap is the heap the last forced collection found live.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC() // the second cycle frees what the first one's finalizers let go
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestPromptLogprobsMemoryReturns: the logits of a long prompt scored for
// echo + logprobs (one row of the vocabulary per position, 206 MB for
// 1,024 positions of GPT-2's) must not outlive the request. Through the
// public API: the built-in model behind openai.NewHandler, the live heap
// read with runtime/metrics before and after.
func TestPromptLogprobsMemoryReturns(t *testing.T) {
	e, err := Open(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	srv := httptest.NewServer(openai.NewHandler(e))
	defer srv.Close()

	post := func(body string) map[string]any {
		t.Helper()
		resp, err := http.Post(srv.URL+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %v", resp.StatusCode, out)
		}
		return out
	}
	ids := func(n int) string {
		s := make([]string, n)
		for i := range s {
			s[i] = fmt.Sprint(100 + i%5000)
		}
		return "[" + strings.Join(s, ",") + "]"
	}
	small := `{"model":"` + DefaultModel + `","prompt":"Hello","max_tokens":2}`
	// Warm every path once, so that the baseline holds what serving
	// keeps: the scoring workers, the handler's pools, and the backend's
	// step buffers grown to a long prompt's chunk (bounded by the step
	// budget, and the same with or without logprobs).
	const n = 1023
	post(`{"model":"` + DefaultModel + `","prompt":` + ids(256) + `,"max_tokens":1,"echo":true,"logprobs":2}`)
	post(`{"model":"` + DefaultModel + `","prompt":` + ids(n) + `,"max_tokens":1}`)
	post(small)
	before := liveHeap()

	out := post(`{"model":"` + DefaultModel + `","prompt":` + ids(n) + `,"max_tokens":1,"echo":true,"logprobs":2}`)
	choices := out["choices"].([]any)
	lp := choices[0].(map[string]any)["logprobs"].(map[string]any)
	if got := len(lp["token_logprobs"].([]any)); got != n+1 {
		t.Fatalf("%d token logprobs, want %d", got, n+1)
	}
	out = nil
	post(small) // a later request, as in serving
	after := liveHeap()
	t.Logf("live heap before %.1f MB, after %.1f MB", float64(before)/1e6, float64(after)/1e6)
	if after > before+before/10 {
		t.Errorf("live heap grew from %d to %d bytes (more than 10%%) after one echo+logprobs request of %d tokens", before, after, n)
	}
}
