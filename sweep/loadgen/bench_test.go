package loadgen

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

var benchStream = strings.Repeat(`data: {"id":"c","object":"text_completion","choices":[{"index":0,"text":" tok","finish_reason":null}]}`+"\n\n", 32) +
	`data: {"id":"c","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":32}}` + "\n\ndata: [DONE]\n\n"

// BenchmarkParseStream is the client's per-response parsing cost for a
// 32-chunk stream.
func BenchmarkParseStream(b *testing.B) {
	b.SetBytes(int64(len(benchStream)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseStream(strings.NewReader(benchStream), time.Now); err != nil {
			b.Fatal(err)
		}
	}
}

var benchChatStream = `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n" +
	strings.Repeat(`data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" tok"},"finish_reason":null}]}`+"\n\n", 32) +
	`data: {"id":"c","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":32}}` + "\n\ndata: [DONE]\n\n"

// BenchmarkParseChatStream is BenchmarkParseStream for a 32-token chat
// stream in vLLM's shape (a role chunk first).
func BenchmarkParseChatStream(b *testing.B) {
	b.SetBytes(int64(len(benchChatStream)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseStreamAPI(strings.NewReader(benchChatStream), APIChat, time.Now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRunCondition is the whole client per request (body, HTTP, SSE
// with four text chunks, record) against an in-process endpoint that answers
// at once; see bench/client for the comparison with wrk.
func BenchmarkRunCondition(b *testing.B) {
	body := []byte(strings.Repeat(`data: {"id":"c","object":"text_completion","choices":[{"index":0,"text":" tok","finish_reason":null}]}`+"\n\n", 4) +
		`data: {"id":"c","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":4}}` + "\n\ndata: [DONE]\n\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(body)
	}))
	defer srv.Close()
	for _, c := range []int{1, 256} {
		b.Run(fmt.Sprintf("concurrency=%d", c), func(b *testing.B) {
			rows := testRows(1024, 4)
			opts := LoadOptions{URL: srv.URL, Model: "m", Concurrency: c, Stream: true, Client: NewHTTPClient(c)}
			var out bytes.Buffer
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				out.Reset()
				if _, _, err := RunCondition(context.Background(), opts, rows, &out); err != nil {
					b.Fatal(err)
				}
				n += len(rows)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/request")
		})
	}
}
