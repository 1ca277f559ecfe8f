// Package fakeopenai is a fake OpenAI-compatible server for tests of the
// load generator (sweep/loadgen) and of the sweep runner above it (sweep):
// one copy, so the two layers are tested against the same server. It
// imports neither, so that loadgen's own tests can use it.
package fakeopenai

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Server is a tiny OpenAI-compatible server for tests: /v1/completions
// and, in its chat mode, /v1/chat/completions (ChatURL), which streams
// vLLM's chunk shapes. Its capacity semaphore makes a plateau structural:
// with Slots requests being served, the rest wait, so throughput cannot
// grow past Slots whatever the machine's load.
type Server struct {
	Slots     int           // requests served at once; 0 = unlimited
	TokenTime time.Duration // time per generated token
	NoUsage   bool          // omit usage
	// Reasoning is how many of a chat answer's tokens come as
	// reasoning_content before the content, as a reasoning model's do.
	Reasoning int
	// Empty makes chat answers carry nothing: streamed, only the role
	// chunk; otherwise an empty message without a finish reason.
	Empty bool
	// Fail, when set, is asked about every completion request (its number
	// and body): a non-zero status is answered instead, with an error body.
	Fail func(n int64, body map[string]any) int
	// Hook runs at the start of every completion request, with its number.
	Hook func(n int64)
	// Version, when set, is served at GET /version as vLLM does; set it
	// under Mu once the server runs.
	Version string

	// LagSuccess makes /metrics report vllm:request_success_total as the
	// previous scrape found it, as a server whose counters follow its
	// answers shows a run's last requests only a moment later.
	LagSuccess bool

	// Mu guards Fail, Hook and Version once the server runs, and Bodies
	// and Headers always: tests change the first while requests may come.
	Mu sync.Mutex
	// Requests counts the completion requests received, Answered those
	// answered in full (the success counter /metrics reports).
	Requests, Answered atomic.Int64
	// Bodies and Headers are every request's, in arrival order (under Mu).
	Bodies  []map[string]any
	Headers []http.Header

	published int64 // the lagging counter, under Mu
	sem       chan struct{}
	srv       *httptest.Server
}

// Start starts f, stopped when the test ends, and returns it.
func Start(t testing.TB, f *Server) *Server {
	t.Helper()
	if f.Slots > 0 {
		f.sem = make(chan struct{}, f.Slots)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", f.completions)
	mux.HandleFunc("POST /v1/chat/completions", f.chat)
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"object":"list","data":[{"id":"fake-model","object":"model"}]}`)
	})
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, r *http.Request) {
		f.Mu.Lock()
		v := f.Version
		f.Mu.Unlock()
		if v == "" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, `{"version":%q}`, v)
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "# HELP vllm:num_requests_running x\nvllm:num_requests_running{model_name=\"fake\"} %d\nvllm:num_preemptions_total{model_name=\"fake\"} 0\n", len(f.sem))
		success := f.Answered.Load()
		if f.LagSuccess {
			f.Mu.Lock()
			success, f.published = f.published, success
			f.Mu.Unlock()
		}
		fmt.Fprintf(w, "vllm:request_success_total{finished_reason=\"length\"} %d\n", success)
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// URL is the completions endpoint.
func (f *Server) URL() string { return f.srv.URL + "/v1/completions" }

// ChatURL is the chat endpoint, which makes the client speak chat.
func (f *Server) ChatURL() string { return f.srv.URL + "/v1/chat/completions" }

func (f *Server) completions(w http.ResponseWriter, r *http.Request) {
	f.serve(w, r, false)
}

func (f *Server) chat(w http.ResponseWriter, r *http.Request) { f.serve(w, r, true) }

// serve answers a chat or a completions request; a body without that
// API's prompt and output length fields is refused with 400, as a real
// server would.
func (f *Server) serve(w http.ResponseWriter, r *http.Request, chat bool) {
	n := f.Requests.Add(1)
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, `{"error":"bad json"}`, 400)
		return
	}
	f.Mu.Lock()
	f.Bodies = append(f.Bodies, body)
	f.Headers = append(f.Headers, r.Header.Clone())
	hook := f.Hook
	f.Mu.Unlock()
	if hook != nil {
		hook(n)
	}
	if f.Fail != nil {
		if code := f.Fail(n, body); code != 0 {
			w.WriteHeader(code)
			io.WriteString(w, `{"error":{"message":"injected failure","type":"BadRequestError"}}`)
			return
		}
	}
	if f.sem != nil {
		select {
		case f.sem <- struct{}{}:
			defer func() { <-f.sem }()
		case <-r.Context().Done():
			return
		}
	}
	maxTokens, ok := outputLength(body, chat)
	if !ok {
		http.Error(w, `{"error":{"message":"missing prompt or output length"}}`, 400)
		return
	}
	stream, _ := body["stream"].(bool)
	sleep := func() {
		if f.TokenTime > 0 {
			select {
			case <-time.After(f.TokenTime):
			case <-r.Context().Done():
			}
		}
	}
	if chat {
		f.answerChat(w, maxTokens, stream, sleep)
		return
	}
	if !stream {
		for range maxTokens {
			sleep()
		}
		fmt.Fprintf(w, `{"choices":[{"text":%q,"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":%d}}`, strings.Repeat("t", maxTokens), maxTokens)
		f.Answered.Add(1)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	for i := range maxTokens {
		sleep()
		fr := "null"
		if i == maxTokens-1 {
			fr = `"length"`
		}
		fmt.Fprintf(w, "data: {\"choices\":[{\"text\":\"t\",\"finish_reason\":%s}]}\n\n", fr)
		fl.Flush()
	}
	if !f.NoUsage {
		fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":%d}}\n\n", maxTokens)
	}
	io.WriteString(w, "data: [DONE]\n\n")
	f.Answered.Add(1)
}

// outputLength checks the request's prompt fields for its API (chat or
// completions) and returns its output length.
func outputLength(body map[string]any, chat bool) (int, bool) {
	if !chat {
		v, ok := body["max_tokens"].(float64)
		return int(v), ok
	}
	msgs, _ := body["messages"].([]any)
	if len(msgs) != 1 {
		return 0, false
	}
	if m, _ := msgs[0].(map[string]any); m["role"] != "user" || m["content"] == "" {
		return 0, false
	}
	if _, ok := body["max_tokens"]; ok {
		return 0, false
	}
	v, ok := body["max_completion_tokens"].(float64)
	return int(v), ok
}

// answerChat writes a chat answer of n tokens ("r" for the first
// f.Reasoning, as reasoning_content, then "t"), shaped as vLLM's: streamed,
// a first chunk with only the role and an empty content, one chunk per
// token, finish_reason on the last, then usage.
func (f *Server) answerChat(w http.ResponseWriter, n int, stream bool, sleep func()) {
	reasoning := min(f.Reasoning, n)
	if f.Empty && !stream {
		io.WriteString(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":null}]}`)
		return
	}
	if f.Empty {
		n = 0
	}
	if !stream {
		for range n {
			sleep()
		}
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","reasoning_content":%q,"content":%q},"finish_reason":"length"}],"usage":{"prompt_tokens":12,"completion_tokens":%d}}`,
			strings.Repeat("r", reasoning), strings.Repeat("t", n-reasoning), n)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	const head = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"fake-model","choices":[{"index":0,"delta":`
	io.WriteString(w, head+`{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`+"\n\n")
	fl.Flush()
	for i := range n {
		sleep()
		delta, fr := `{"content":"t"}`, "null"
		if i < reasoning {
			delta = `{"reasoning_content":"r"}`
		}
		if i == n-1 {
			fr = `"length"`
		}
		fmt.Fprintf(w, "%s%s,\"logprobs\":null,\"finish_reason\":%s}]}\n\n", head, delta, fr)
		fl.Flush()
	}
	if !f.NoUsage {
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":%d}}\n\n", n)
	}
	io.WriteString(w, "data: [DONE]\n\n")
}

// Quiet waits until the server has seen every request an interrupted
// sweep sent (requests cancelled in flight may still reach the handler)
// and returns their number.
func (f *Server) Quiet() int64 {
	sent := f.Requests.Load()
	for {
		time.Sleep(30 * time.Millisecond)
		now := f.Requests.Load()
		if now == sent {
			return sent
		}
		sent = now
	}
}
