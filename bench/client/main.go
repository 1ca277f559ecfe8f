// Command client measures what tinyserve's load client costs: it serves a
// completions endpoint that answers at once (serve), and drives it with
// sweep.RunCondition (load), so that run.sh can put the client's requests/s
// and per-request time beside wrk's on the same endpoint. See README.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/tinyserve/tinyserve/sweep/loadgen"
)

// streamBody is one fixed SSE answer: four text chunks, usage and [DONE],
// the shape of a short streamed completion.
var streamBody = []byte(strings.Join([]string{
	`data: {"id":"c","object":"text_completion","choices":[{"index":0,"text":" a","finish_reason":null}]}`,
	`data: {"id":"c","object":"text_completion","choices":[{"index":0,"text":" b","finish_reason":null}]}`,
	`data: {"id":"c","object":"text_completion","choices":[{"index":0,"text":" c","finish_reason":null}]}`,
	`data: {"id":"c","object":"text_completion","choices":[{"index":0,"text":" d","finish_reason":"length"}]}`,
	`data: {"id":"c","object":"text_completion","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":4,"total_tokens":12}}`,
	`data: [DONE]`,
}, "\n\n") + "\n\n")

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: client serve ADDR | client load URL CONCURRENCY REQUESTS")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "load":
		err = load(os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
}

// serve answers every POST with streamBody at once: the request body is
// read and dropped, nothing is computed, so all time is client and HTTP.
func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	fs.Parse(args)
	addr := fs.Arg(0)
	if addr == "" {
		addr = "127.0.0.1:18080"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(streamBody)
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	return srv.Serve(ln)
}

// load runs one condition and prints one JSON line with the figures.
func load(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("load wants URL CONCURRENCY REQUESTS")
	}
	var conc, n int
	if _, err := fmt.Sscan(args[1], &conc); err != nil {
		return err
	}
	if _, err := fmt.Sscan(args[2], &n); err != nil {
		return err
	}
	rows := make([]loadgen.Row, n)
	out := 4
	for i := range rows {
		rows[i] = loadgen.Row{ID: fmt.Sprint(i), Prompt: "The quick brown fox jumps over the lazy dog", TargetOutputTokens: &out}
	}
	opts := loadgen.LoadOptions{URL: args[0], Model: "bench", Concurrency: conc, Stream: true, IgnoreEOS: true}
	// Warm the connection pool so that the figure is the steady state.
	if _, _, err := loadgen.RunCondition(context.Background(), opts, rows[:min(len(rows), conc*2)], io.Discard); err != nil {
		return err
	}
	f, err := os.CreateTemp("", "client-bench-*.jsonl")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	sum, _, err := loadgen.RunCondition(context.Background(), opts, rows, f)
	if err != nil {
		return err
	}
	if sum.Counts.Failed > 0 {
		return fmt.Errorf("%d requests failed", sum.Counts.Failed)
	}
	res := map[string]any{
		"concurrency":         conc,
		"requests":            n,
		"duration_s":          sum.DurationS,
		"requests_per_s":      *sum.RequestThroughput,
		"latency_p50_ms":      *sum.LatencyS.P50 * 1000,
		"latency_p99_ms":      *sum.LatencyS.P99 * 1000,
		"ttft_p50_ms":         *sum.TTFTS.P50 * 1000,
		"wall_per_request_us": sum.DurationS / float64(n) * 1e6,
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}
