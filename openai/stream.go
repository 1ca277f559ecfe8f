package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"
	"unicode/utf8"
)

// sseWriter writes server-sent events, each flushed at once under a write
// deadline pushed forward before it, so a stalled reader is dropped.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	buf     bytes.Buffer
}

func (s *sseWriter) event(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding an event: %w", err)
	}
	return s.write(b)
}

func (s *sseWriter) done() error { return s.write([]byte("[DONE]")) }

func (s *sseWriter) write(data []byte) error {
	s.buf.Reset()
	s.buf.WriteString("data: ")
	s.buf.Write(data)
	s.buf.WriteString("\n\n")
	setWriteDeadline(s.rc, s.timeout)
	if _, err := s.w.Write(s.buf.Bytes()); err != nil {
		return err
	}
	return s.flush()
}

func (s *sseWriter) flush() error {
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// startSSE sends a stream's headers and flushes them; false means the
// client is gone (cancel was called).
func (h *handler) startSSE(w http.ResponseWriter, r *http.Request, cancel context.CancelFunc) (*sseWriter, bool) {
	lg := requestLogger(r)
	sse := &sseWriter{w: w, rc: http.NewResponseController(w), timeout: h.cfg.writeTimeout}
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no") // tell proxies not to buffer the stream
	w.WriteHeader(http.StatusOK)
	if err := sse.rc.Flush(); errors.Is(err, http.ErrNotSupported) {
		lg.Warn("the response writer cannot flush, so the stream is buffered; does a middleware's ResponseWriter lack Unwrap?")
	} else if err != nil {
		cancel()
		lg.Info("stream aborted", "err", err)
		return nil, false
	} else if err := sse.rc.SetWriteDeadline(time.Now().Add(sse.timeout)); errors.Is(err, http.ErrNotSupported) {
		// A wrapper with Flush but without Unwrap streams, yet hides the
		// connection's deadline: say so, since nothing else would.
		lg.Warn("the response writer cannot set a write deadline, so a client that stops reading is not dropped; does a middleware's ResponseWriter lack Unwrap?")
	}
	return sse, true
}

// streamCompletion writes the choices' events as server-sent events: one
// flushed chunk per engine event that carries new tokens, even when their
// text is empty, as vLLM's completion stream does (serving_completion.py,
// completion_stream_generator; v1's OutputProcessor makes a DELTA output for
// every step with new token ids, while its detokenizer holds back half a
// character or text that could still start a stop string). A chunk thus goes
// out at each token, carrying that token's id and log-probability, and a
// client that times chunks (vllm bench serve's TTFT and inter-token
// latencies) sees the tokens when they were made.
//
// When the stream falls behind the engine (a slow client, a busy machine,
// many streams), the events already queued for a choice when it gets to one
// are merged into one chunk: its text, token ids and logprobs are theirs
// together, its usage is the last one's, and it finishes if the last one
// does. vLLM's RequestOutputCollector (vllm/v1/engine/output_processor.py,
// with RequestOutput.add in vllm/outputs.py) merges per choice index the
// same way the outputs its consumer has not taken yet, so its stream sends
// fewer, larger chunks instead of a burst of tiny ones. Every event is still
// applied, and observed by the metrics, on its own; only where chunks
// begin and end changes.
func (h *handler) streamCompletion(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter,
	r *http.Request, req *completionRequest, prompts []promptIn, choices []*choice) {
	lg := requestLogger(r)
	sse, ok := h.startSSE(w, r, cancel)
	if !ok {
		return
	}
	base := completionResponse{
		ID: "cmpl-" + requestInfo(r).id, Object: "text_completion", Created: time.Now().Unix(),
		Model: h.modelName(req.model),
	}
	wantLP := req.params.Logprobs != nil
	// send writes what c applied since its last chunk, if anything.
	send := func(c *choice, finished bool) error {
		c.held = false
		// vLLM skips only an output with neither text nor new tokens before
		// the choice's first token (its chunked-prefill case); the echo's
		// chunk and a finish always go out.
		if c.text.Len() == 0 && c.newTokens == 0 && c.sentTokens == 0 && !finished && (c.started || !req.echo) {
			return nil
		}
		cc := completionChoice{Index: c.index, Text: c.text.String()}
		first := !c.started
		if first {
			c.started = true
			if req.echo {
				cc.Text = prompts[c.prompt].text + cc.Text
			}
			if req.returnTokenIDs {
				cc.PromptTokenIDs = nonNil(prompts[c.prompt].tokens)
			}
		}
		if wantLP {
			// As vLLM's stream does, each chunk's offsets start at the text
			// sent so far, whatever the token strings of the chunks before
			// added up to (U+FFFD for half a character, "token_id:N").
			c.offset = c.sent
			cc.Logprobs = h.choiceLogprobs(c, req, prompts[c.prompt].tokens, first)
		}
		c.sent += utf8.RuneCountInString(cc.Text)
		if req.returnTokenIDs {
			cc.TokenIDs = nonNil(c.tokenIDs)
		}
		if finished {
			fr := string(c.finish)
			cc.FinishReason = &fr
			cc.StopReason = c.stopReason
		}
		c.text.Reset()
		c.tokenIDs, c.lps = nil, nil
		c.sentTokens += c.newTokens
		c.newTokens = 0
		chunk := base
		chunk.Choices = []completionChoice{cc}
		var out any = chunk
		if req.includeUsage {
			cu := chunkWithUsage{completionResponse: chunk}
			if req.continuousUsage {
				// As vLLM: this choice's prompt and its tokens so far.
				cu.Usage = &usage{PromptTokens: c.promptTokens, CompletionTokens: c.completionTokens,
					TotalTokens: c.promptTokens + c.completionTokens}
			}
			out = cu
		}
		return sse.event(out)
	}
	done := 0
	var writeErr error
	failed := h.applyEach(ctx, cancel, choices, req, func(c *choice, finished, queued bool) bool {
		if queued {
			// The next event is already here: merge this one into its chunk.
			c.held = true
			return true
		}
		if writeErr = send(c, finished); writeErr != nil {
			return false
		}
		if finished {
			done++
		}
		return done < len(choices)
	})
	if !h.endStream(r, sse, cancel, choices, failed, writeErr, send) {
		return
	}
	var final any
	if req.includeUsage {
		u := totalUsage(req, prompts, choices)
		chunk := base
		chunk.Choices = []completionChoice{}
		final = chunkWithUsage{completionResponse: chunk, Usage: &u}
	}
	closeStream(lg, sse, final)
}

// totalUsage is a request's usage once every choice has finished.
func totalUsage(req *completionRequest, prompts []promptIn, choices []*choice) usage {
	u := usage{}
	cached := make([]int, len(prompts))
	for _, c := range choices {
		u.add(c, req.n, cached)
	}
	u.finish(cached)
	return u
}

// closeStream ends a stream that went well: the usage chunk when there is
// one (final), then [DONE].
func closeStream(lg *slog.Logger, sse *sseWriter, final any) {
	if final != nil {
		if err := sse.event(final); err != nil {
			lg.Info("stream aborted: writing to the client failed", "err", err)
			return
		}
	}
	if err := sse.done(); err != nil {
		lg.Info("stream aborted: writing to the client failed", "err", err)
	}
}

// endStream settles a stream once its choices stopped: what was held back
// to merge goes out before an engine error, as it would have unmerged (an
// error or abort event carries no tokens), and the error is sent as an
// event; a failed write or a client gone ends it quietly. true means the
// stream ended well and its usage and [DONE] are still to come.
func (h *handler) endStream(r *http.Request, sse *sseWriter, cancel context.CancelFunc, choices []*choice,
	failed *choice, writeErr error, send func(c *choice, finished bool) error) bool {
	lg := requestLogger(r)
	if failed != nil && writeErr == nil && r.Context().Err() == nil {
		for _, c := range choices {
			if c.held {
				if writeErr = send(c, false); writeErr != nil {
					break
				}
			}
		}
	}
	switch {
	case writeErr != nil:
		cancel()
		lg.Info("stream aborted: writing to the client failed", "err", writeErr)
		return false
	case r.Context().Err() != nil:
		lg.Info("client went away; request aborted", "err", context.Cause(r.Context()))
		return false
	case failed != nil:
		cancel()
		e := engineError(h.eventError(failed.err))
		lg.Error("stream failed after the headers were sent", "status", e.status, "err", e.Message)
		if err := sse.event(errorBody{e}); err == nil {
			_ = sse.done()
		}
		return false
	}
	return true
}
