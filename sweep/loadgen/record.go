package loadgen

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// ResultSchemaVersion is the version of the per-request record schema,
// serving-inference's RESULT_SCHEMA_VERSION. tinyserve only adds fields to
// it, so the version stays the same.
const ResultSchemaVersion = "1.0"

// MaxErrorBodyChars bounds the error_body kept for a failed request, in
// characters (Unicode code points, as Python counts them).
const MaxErrorBodyChars = 4096

// DefaultMaxTokens is the max_tokens sent for a row without
// target_output_tokens, serving-inference's fallback.
const DefaultMaxTokens = 128

// Row is one line of a prompt file (prompts/<workload>.jsonl). The schema is
// fixed by serving-inference's generate_prompts.py; unknown keys are ignored.
// It is the reader's side of workload.Row (which this package does not
// import): rows generated in memory become Rows through that format,
// DecodeRows(bytes.NewReader(workload.MarshalRows(rows)), 0), as
// ExampleRunCondition shows.
type Row struct {
	Bucket             string `json:"bucket"`               // the workload bucket the row was drawn for
	ID                 string `json:"id"`                   // unique within the workload
	Prompt             string `json:"prompt"`               // the text sent
	PromptTokens       *int   `json:"prompt_tokens"`        // the prompt's length in the workload's tokenizer
	TargetOutputTokens *int   `json:"target_output_tokens"` // sent as max_tokens
	TargetPromptTokens *int   `json:"target_prompt_tokens"` // the length the generator aimed for
	Workload           string `json:"workload"`             // the workload's name
	// Category is what serving-inference's first prompt files (and its
	// send_requests.py default, prompts/generated_prompts.jsonl) carry
	// instead of workload; a record's workload falls back to it, as
	// send_requests.py's does.
	Category string `json:"category"`
}

// workloadName is the workload a record names for the row: its workload,
// else its category (send_requests.py's row.get("workload") or
// row.get("category")); "" when the row has neither.
func (r *Row) workloadName() string {
	if r.Workload != "" {
		return r.Workload
	}
	return r.Category
}

// MaxTokens is the max_tokens to request for the row.
func (r *Row) MaxTokens() int {
	if r.TargetOutputTokens != nil {
		return *r.TargetOutputTokens
	}
	return DefaultMaxTokens
}

// ErrTooFewRows is returned by [ReadRows] when the file has fewer rows than
// asked for; nothing may be sent in that case, so the caller learns it first.
var ErrTooFewRows = errors.New("prompt file has too few rows")

// ReadRows reads the first n rows of the prompt file at path (every row when
// n <= 0). Blank lines are skipped. A file with fewer than n rows is an
// error wrapping [ErrTooFewRows].
func ReadRows(path string, n int) ([]Row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("prompts: %w", err)
	}
	defer f.Close()
	rows, err := DecodeRows(f, n)
	if err != nil {
		return nil, fmt.Errorf("prompts %s: %w", path, err)
	}
	return rows, nil
}

// DecodeRows is [ReadRows] over a reader.
func DecodeRows(r io.Reader, n int) ([]Row, error) {
	var rows []Row
	br := bufio.NewReaderSize(r, 1<<16)
	line := 0
	for n <= 0 || len(rows) < n {
		b, err := br.ReadBytes('\n')
		if len(b) > 0 {
			line++
			if t := bytes.TrimSpace(b); len(t) > 0 {
				var row Row
				if jerr := json.Unmarshal(t, &row); jerr != nil {
					return nil, fmt.Errorf("line %d: %w", line, jerr)
				}
				if row.Prompt == "" {
					return nil, fmt.Errorf("line %d: prompt is empty", line)
				}
				// Refused here, before anything is sent: the server would
				// refuse the request, and a sweep would keep a failed run.
				if t := row.TargetOutputTokens; t != nil && *t < 1 {
					return nil, fmt.Errorf("line %d: target_output_tokens must be at least 1, got %d", line, *t)
				}
				rows = append(rows, row)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%w: no prompts", ErrTooFewRows)
	}
	if n > 0 && len(rows) < n {
		return nil, fmt.Errorf("%w: requested %d requests but the file contains only %d prompts", ErrTooFewRows, n, len(rows))
	}
	return rows, nil
}

// Status is a record's status: the HTTP status code, or a transport failure
// (no complete response), which serializes as the string "error" like
// serving-inference's records.
type Status int

// StatusError is the Status of a request that got no complete HTTP
// response: a transport failure or timeout before or during the body (a
// stream cut after its 200 header included, as serving-inference records
// it).
const StatusError Status = 0

// OK reports whether the server answered HTTP 200. Whether the request
// succeeded is [Record.OK]: a 200 may still carry no answer.
func (s Status) OK() bool { return s == 200 }

// MarshalJSON implements json.Marshaler.
func (s Status) MarshalJSON() ([]byte, error) {
	if s == StatusError {
		return []byte(`"error"`), nil
	}
	return strconv.AppendInt(nil, int64(s), 10), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (s *Status) UnmarshalJSON(b []byte) error {
	if string(b) == `"error"` {
		*s = StatusError
		return nil
	}
	n, err := strconv.Atoi(string(b))
	if err != nil || n <= 0 {
		return fmt.Errorf("status: want an HTTP code or \"error\", got %s", b)
	}
	*s = Status(n)
	return nil
}

// Record is one request's evidence, one JSONL line. Field names and meanings
// are serving-inference's schema 1.0 (send_one in scripts/send_requests.py);
// Bucket, XRequestID, ClientQueueS and ConnectionReused are tinyserve's
// additions at the end.
// Times are seconds; offsets are from the start of the run.
type Record struct {
	SchemaVersion      string  `json:"schema_version"`       // ResultSchemaVersion
	ID                 string  `json:"id"`                   // the prompt row's id
	RequestIndex       int     `json:"request_index"`        // the row's position in the prompt file
	Workload           *string `json:"workload"`             // the row's workload
	PromptTokens       *int    `json:"prompt_tokens"`        // the server's usage.prompt_tokens, else the row's
	TargetPromptTokens *int    `json:"target_prompt_tokens"` // the row's target
	TargetOutputTokens int     `json:"target_output_tokens"` // max_tokens as sent
	Status             Status  `json:"status"`               // HTTP status, or StatusError
	// StartedOffsetS is when the request was sent (after it got its
	// concurrency slot), EndedOffsetS when its response ended.
	StartedOffsetS float64 `json:"started_offset_s"`
	EndedOffsetS   float64 `json:"ended_offset_s"`
	// LatencyS is the end of the response minus the send time.
	LatencyS float64 `json:"latency_s"`
	// TTFTS is the first SSE event with non-empty text minus the send time;
	// nil when not streaming or no text arrived.
	TTFTS *float64 `json:"ttft_s"`
	// TPOTS is (last text event - first text event) / (output tokens - 1):
	// an approximation, because a chunk may carry several tokens.
	TPOTS *float64 `json:"approx_time_per_output_token_s"`
	// InterChunkS are the gaps between successive text events: chunks, not
	// tokens.
	InterChunkS []float64 `json:"observed_inter_chunk_latency_s"`
	// OutputTokens is usage.completion_tokens as reported by the server; nil
	// when the server sent no usage (ServerTokenUsagePresent is then false).
	OutputTokens            *int    `json:"output_tokens"`
	ServerTokenUsagePresent bool    `json:"server_token_usage_present"`
	FinishReason            *string `json:"finish_reason"`           // the last choices[0].finish_reason
	StreamTextEventCount    *int    `json:"stream_text_event_count"` // SSE events with text; nil without streaming
	MalformedStreamEvents   *int    `json:"malformed_stream_events"` // data lines that were not a JSON object
	// ErrorBody is the first MaxErrorBodyChars characters of a non-200
	// response.
	ErrorBody          *string `json:"error_body,omitempty"`
	ErrorBodyTruncated *bool   `json:"error_body_truncated,omitempty"`
	// Error describes a transport failure (Status is StatusError), or why a
	// 200 response was not an answer (Status stays 200; see [Record.OK]).
	Error *string `json:"error,omitempty"`
	// Response is the generated text (streaming) or the raw body, only with
	// store_response.
	Response *string `json:"response,omitempty"`
	// Bucket is the prompt row's bucket, so mixed workloads can be split.
	Bucket *string `json:"bucket"`
	// XRequestID was sent as the X-Request-Id header, so the request can be
	// found in the server's logs.
	XRequestID string `json:"x_request_id"`
	// ClientQueueS is how long the request waited for a concurrency slot (or,
	// in open-loop mode, past its scheduled arrival) before being sent. It is
	// not part of LatencyS.
	ClientQueueS float64 `json:"client_queue_s"`
	// ConnectionReused is true when the request went over a kept-alive
	// connection and false when it opened one, whose setup (TCP, and TLS
	// for https) is inside its TTFT and latency, as in vLLM's benchmark;
	// nil when no connection was had (or in a file that lacks the field).
	ConnectionReused *bool `json:"connection_reused"`
	// HeldOpenAfterDone is true when a stream's body did not end within
	// 100 ms of data: [DONE] (or went on past 64 KiB): the client closed it,
	// dropping the connection, and that time fell between requests, lowering
	// the run's throughput without entering any latency. Absent otherwise.
	HeldOpenAfterDone *bool `json:"held_open_after_done,omitempty"`
}

// OK reports whether the request succeeded: HTTP 200 and an answer. A 200
// whose body was not one (an error object, no content, a stream cut short)
// carries Error and is a failure, unlike in serving-inference, which counts
// every 200.
func (r *Record) OK() bool { return r.Status.OK() && r.Error == nil }

// FailureReason says in one line why the request failed, for messages
// (the record keeps the whole story); "" when it succeeded. A non-200
// answer is named by its status and the message of its OpenAI error body
// when it has one.
func (r *Record) FailureReason() string {
	const maxLen = 300
	switch {
	case r.OK():
		return ""
	case r.Status == StatusError:
		return "no response: " + orEmpty(r.Error)
	case r.Status.OK():
		return orEmpty(r.Error)
	}
	body := strings.TrimSpace(orEmpty(r.ErrorBody))
	var parsed struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal([]byte(body), &parsed) == nil {
		if msg := errorMessage(parsed.Error); msg != "" {
			body = msg
		}
	}
	if n := len([]rune(body)); n > maxLen {
		body = string([]rune(body)[:maxLen]) + "…"
	}
	if body == "" {
		return fmt.Sprintf("HTTP %d", int(r.Status))
	}
	return fmt.Sprintf("HTTP %d: %s", int(r.Status), body)
}

// FirstFailure describes the first failed request of records (in the
// order given), or "" when none failed.
func FirstFailure(records []Record) string {
	for i := range records {
		if reason := records[i].FailureReason(); reason != "" {
			return fmt.Sprintf("request %s: %s", records[i].ID, reason)
		}
	}
	return ""
}

func orEmpty(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// ReadRecords reads a JSONL file of records; blank lines are skipped.
func ReadRecords(path string) ([]Record, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Record
	for i, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, i+1, err)
		}
		out = append(out, r)
	}
	return out, nil
}
