package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptrace"
	"strings"
	"time"
	"unicode/utf8"
)

// sender sends requests of one run; it is shared by the workers and read
// only.
type sender struct {
	opts    LoadOptions
	api     API // the API opts.URL speaks
	extra   []byte
	client  *http.Client
	prefix  string
	started time.Time
}

// body is the JSON request body for row in the run's API, with the run's
// extra_body fields spliced in.
func (s *sender) body(row *Row) ([]byte, error) {
	var stream *streamOptions
	if s.opts.Stream {
		stream = &streamOptions{IncludeUsage: true}
	}
	var b any
	if s.api == APIChat {
		b = &chatBody{
			Model:               s.opts.Model,
			Messages:            []chatMessage{{Role: "user", Content: row.Prompt}},
			MaxCompletionTokens: row.MaxTokens(),
			Temperature:         s.opts.Temperature,
			Stream:              s.opts.Stream,
			StreamOptions:       stream,
			IgnoreEOS:           s.opts.IgnoreEOS,
		}
	} else {
		b = &completionBody{
			Model:         s.opts.Model,
			Prompt:        row.Prompt,
			MaxTokens:     row.MaxTokens(),
			Temperature:   s.opts.Temperature,
			Stream:        s.opts.Stream,
			StreamOptions: stream,
			IgnoreEOS:     s.opts.IgnoreEOS,
		}
	}
	return encodeBody(b, s.extra)
}

// encodeBody encodes b (a request struct) and splices extra, members
// without braces, in before its closing brace.
func encodeBody(b any, extra []byte) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(b); err != nil {
		return nil, err
	}
	out := bytes.TrimRight(buf.Bytes(), "\n")
	if len(extra) > 0 {
		out = append(out[:len(out)-1], ',')
		out = append(out, extra...)
		out = append(out, '}')
	}
	return out, nil
}

// send sends one request and returns its record: failures to send or read
// are in the record (Status StatusError), never a Go error, because they
// are evidence about the server.
func (s *sender) send(ctx context.Context, j job) Record {
	row := j.row
	rec := Record{
		SchemaVersion:      ResultSchemaVersion,
		ID:                 row.ID,
		RequestIndex:       j.index,
		PromptTokens:       row.PromptTokens,
		TargetPromptTokens: row.TargetPromptTokens,
		TargetOutputTokens: row.MaxTokens(),
		InterChunkS:        []float64{},
		XRequestID:         fmt.Sprintf("%s-%06d", s.prefix, j.index),
	}
	if w := row.workloadName(); w != "" {
		rec.Workload = &w
	}
	if row.Bucket != "" {
		b := row.Bucket
		rec.Bucket = &b
	}
	body, err := s.body(row)
	start := time.Now()
	rec.ClientQueueS = max(start.Sub(j.eligible).Seconds(), 0)
	rec.StartedOffsetS = start.Sub(s.started).Seconds()
	finish := func() {
		end := time.Now()
		rec.EndedOffsetS = end.Sub(s.started).Seconds()
		rec.LatencyS = end.Sub(start).Seconds()
	}
	fail := func(err error) Record {
		finish()
		rec.Status = StatusError
		msg := fmt.Sprintf("%T: %v", err, err)
		rec.Error = &msg
		rec.StreamTextEventCount, rec.MalformedStreamEvents = nil, nil
		return rec
	}
	if err != nil {
		return fail(err)
	}
	rctx, cancel := context.WithTimeout(ctx, s.opts.timeout())
	defer cancel()
	rctx = httptrace.WithClientTrace(rctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			reused := info.Reused
			rec.ConnectionReused = &reused
		},
	})
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, s.opts.URL, bytes.NewReader(body))
	if err != nil {
		return fail(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", rec.XRequestID)
	if s.opts.Stream {
		req.Header.Set("Accept", "text/event-stream")
	}
	if s.opts.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+s.opts.APIKey)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return fail(err)
	}
	defer resp.Body.Close()
	rec.Status = Status(resp.StatusCode)
	if resp.StatusCode != http.StatusOK {
		text, truncated, rerr := readErrorBody(resp.Body)
		if rerr != nil {
			return fail(rerr)
		}
		finish()
		rec.ErrorBody, rec.ErrorBodyTruncated = &text, &truncated
		return rec
	}
	// A 200 only says the server accepted the request. One whose body is not
	// an answer keeps its status as evidence, gets an error and counts as
	// failed, so near-instant non-answers never enter the latency
	// percentiles or the throughput.
	var notAnswer string
	if s.opts.Stream {
		notAnswer, err = s.readStream(&rec, resp, start, finish, cancel)
	} else {
		notAnswer, err = s.readJSON(&rec, resp.Body, finish)
	}
	if err != nil {
		return fail(err)
	}
	if notAnswer != "" {
		rec.Error = &notAnswer
	}
	return rec
}

// readStream reads a 200 SSE answer into rec, calling finish when the
// answer has ended (before draining what follows [DONE]). notAnswer is
// why the stream is not an answer, if it is not; err is a failure to read
// it at all.
func (s *sender) readStream(rec *Record, resp *http.Response, start time.Time, finish func(), cancel context.CancelFunc) (notAnswer string, err error) {
	sr, err := ParseStreamAPI(resp.Body, s.api, time.Now)
	if err != nil {
		return "", err
	}
	finish()
	if sr.Done && !drainBody(resp.Body, cancel) {
		held := true
		rec.HeldOpenAfterDone = &held
	}
	n, m := sr.TextEvents, sr.Malformed
	rec.StreamTextEventCount, rec.MalformedStreamEvents = &n, &m
	rec.FinishReason = sr.FinishReason
	s.usage(rec, sr.Usage)
	if sr.TextEvents > 0 {
		ttft := sr.FirstText.Sub(start).Seconds()
		rec.TTFTS = &ttft
	}
	if sr.TextEvents > 1 && rec.OutputTokens != nil && *rec.OutputTokens > 1 {
		tpot := sr.LastText.Sub(sr.FirstText).Seconds() / float64(*rec.OutputTokens-1)
		rec.TPOTS = &tpot
	}
	for _, g := range sr.Gaps {
		rec.InterChunkS = append(rec.InterChunkS, g.Seconds())
	}
	if s.opts.StoreResponse {
		rec.Response = &sr.Text
	}
	switch {
	case sr.Error != "":
		return ErrPrefixServer + sr.Error, nil
	case sr.Malformed > 0:
		// An event the client cannot read may have held text: the TTFT,
		// gaps and text would be wrong without saying so. vLLM's benchmark
		// fails such a request too (its json.loads raises).
		if sr.Malformed == 1 {
			return ErrPrefixMalformed + "1 data line was not a JSON object", nil
		}
		return ErrPrefixMalformed + fmt.Sprintf("%d data lines were not JSON objects", sr.Malformed), nil
	case !sr.Done && sr.TextEvents == 0 && isJSON(resp.Header):
		// The server ignored stream: true and sent one body: nothing
		// it says can be timed, and "no [DONE]" would hide why.
		return ErrPrefixNotStream + fmt.Sprintf("Content-Type %q", resp.Header.Get("Content-Type")), nil
	case !sr.Done:
		// A connection closed cleanly mid-answer reads like a short
		// answer; only [DONE] says the server finished.
		return ErrNoDone, nil
	case sr.TextEvents == 0 && sr.FinishReason == nil && rec.TargetOutputTokens >= 1:
		// No text and no finish reason: nothing answered. (An empty
		// text that finished, an immediate EOS or stop string, is an
		// answer.)
		return ErrNoContent, nil
	}
	return "", nil
}

// readJSON reads a 200 JSON answer into rec, calling finish once the body
// is read; notAnswer and err are as for readStream.
func (s *sender) readJSON(rec *Record, body io.Reader, finish func()) (notAnswer string, err error) {
	raw, err := io.ReadAll(body)
	if err != nil {
		return "", err
	}
	finish()
	a, perr := decodeAnswer(raw, s.api)
	if perr == nil {
		if a.usage != nil {
			s.usage(rec, *a.usage)
		}
		rec.FinishReason = a.finish
	}
	if s.opts.StoreResponse {
		str := string(raw)
		rec.Response = &str
	}
	switch {
	case perr != nil:
		return ErrPrefixNotCompletion + "invalid JSON: " + perr.Error(), nil
	case errorMessage(a.err) != "":
		return ErrPrefixServer + errorMessage(a.err), nil
	case a.choices == 0:
		return ErrPrefixNotCompletion + "no choices", nil
	case a.text == "" && a.finish == nil && rec.TargetOutputTokens >= 1:
		return ErrNoContent, nil
	}
	return "", nil
}

// After data: [DONE], drainBody waits at most drainWait for the rest of the
// body and reads at most maxDrain bytes of it.
const (
	drainWait = 100 * time.Millisecond
	maxDrain  = 64 << 10
)

// drainBody reads what is left of a streamed body after data: [DONE],
// normally only the chunked-encoding terminator, which a server may send as
// a separate write (uvicorn, behind vLLM, does). net/http keeps a connection
// only when its body was read to the end; closing it at [DONE] would drop
// the connection, and the worker's next request would pay for a new one
// (a TCP, perhaps a TLS, handshake) inside its TTFT and latency. vLLM's
// benchmark also reads every response to its end. The wait is bounded by
// stop, the request's cancel: a server that keeps the body open after
// [DONE] costs drainWait and that connection, never the run; drainBody
// reports whether the body ended in time.
func drainBody(body io.Reader, stop context.CancelFunc) bool {
	t := time.AfterFunc(drainWait, stop)
	_, err := io.CopyN(io.Discard, body, maxDrain)
	return t.Stop() && errors.Is(err, io.EOF)
}

// The error texts of a 200 response that was not an answer, recorded in a
// record's error field. They are constants so that readers of the records
// can group failures by cause.
const (
	// ErrNoContent: neither text nor a finish reason arrived although at
	// least one token was asked for (vLLM's benchmark calls this "Never
	// received a valid chunk").
	ErrNoContent = "no content received"
	// ErrNoDone: the stream ended without data: [DONE].
	ErrNoDone = "stream ended without [DONE]"
	// ErrPrefixServer starts the message of an error object the server sent
	// in the body or in the stream.
	ErrPrefixServer = "server error: "
	// ErrPrefixNotCompletion starts the reason a non-streamed body is not a
	// completion (not JSON, no choices).
	ErrPrefixNotCompletion = "response is not a completion: "
	// ErrPrefixMalformed starts the reason a stream could not be read
	// whole: data lines that were not JSON objects (or over MaxSSELine).
	ErrPrefixMalformed = "malformed stream: "
	// ErrPrefixNotStream starts the reason a streamed request got a JSON
	// body instead of an SSE stream, followed by the Content-Type.
	ErrPrefixNotStream = "response is not an SSE stream: "
)

// isJSON reports whether a response's Content-Type is application/json.
func isJSON(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

// usage copies the server's token counts into rec: output tokens come from
// the server, never from counting chunks, and the prompt tokens the server
// saw replace the prompt file's figure.
func (s *sender) usage(rec *Record, u Usage) {
	rec.OutputTokens = u.CompletionTokens
	rec.ServerTokenUsagePresent = u.CompletionTokens != nil
	if u.PromptTokens != nil {
		rec.PromptTokens = u.PromptTokens
	}
}

// readErrorBody reads a failed response's body, keeping its first
// MaxErrorBodyChars characters.
func readErrorBody(r io.Reader) (string, bool, error) {
	const maxRead = 1 << 20
	b, err := io.ReadAll(io.LimitReader(r, maxRead+1))
	if err != nil {
		return "", false, err
	}
	truncated := len(b) > maxRead
	text := strings.ToValidUTF8(string(b), "\uFFFD")
	if utf8.RuneCountInString(text) > MaxErrorBodyChars {
		n := 0
		for i := range text {
			if n == MaxErrorBodyChars {
				text = text[:i]
				break
			}
			n++
		}
		truncated = true
	}
	return text, truncated, nil
}
