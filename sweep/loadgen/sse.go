package loadgen

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"time"
)

// MaxSSELine bounds one SSE line. A longer line is counted as one malformed
// event and skipped rather than buffered without limit, so a broken server
// cannot make the client run out of memory.
const MaxSSELine = 4 << 20

// Usage is the token accounting a completions server reports.
type Usage struct {
	PromptTokens     *int `json:"prompt_tokens"`
	CompletionTokens *int `json:"completion_tokens"`
}

// StreamResult is what [ParseStream] learned from one SSE response.
type StreamResult struct {
	Text string
	// Usage merges every usage object seen (vLLM sends it in the last chunk
	// when stream_options.include_usage is set).
	Usage Usage
	// UsageSeen is true when any event carried a usage object.
	UsageSeen bool
	// FirstText and LastText are when the first and last events with
	// non-empty text were read; zero when there were none.
	FirstText, LastText time.Time
	// TextEvents counts events with non-empty text.
	TextEvents int
	// Gaps are the times between successive text events.
	Gaps []time.Duration
	// FinishReason is the last non-null choices[0].finish_reason.
	FinishReason *string
	// Malformed counts data lines that are not a JSON object.
	Malformed int
	// Done is true when the stream ended with data: [DONE].
	Done bool
	// Error is the message of the first event that carried a non-null
	// "error" member (vLLM reports a failure that happens after the 200
	// header this way); empty when none did.
	Error string
}

type sseChunk struct {
	Choices []struct {
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *Usage `json:"usage"`
	// Error is kept raw: servers send an object with a message, a bare
	// string, or null, and any of them must decode without making the
	// chunk malformed.
	Error json.RawMessage `json:"error"`
}

// errorMessage turns an "error" member into the text recorded for the
// request: its message when it is an object with one (OpenAI's and vLLM's
// shape), the string itself, or the raw JSON otherwise. It returns "" for
// an absent or null member.
func errorMessage(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var obj struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Message != "" {
		return obj.Message
	}
	var s string
	if json.Unmarshal(raw, &s) == nil && s != "" {
		return s
	}
	return string(raw)
}

// ParseStream reads an OpenAI completions SSE stream until data: [DONE] or
// the end of r, the way serving-inference's read_stream does: only "data:"
// lines count, each is a JSON object, choices[0].text is the new text, and
// usage objects are merged. now stamps each text event; it is passed in so
// that tests can use a fake clock. The error is the reader's (a transport
// failure), never the stream's content: bad events are counted in Malformed.
func ParseStream(r io.Reader, now func() time.Time) (StreamResult, error) {
	return ParseStreamAPI(r, APICompletions, now)
}

// ParseStreamAPI is [ParseStream] for a stream of api. For [APIChat] the new
// text is choices[0].delta's reasoning_content (or reasoning) followed by
// its content, and an event is a text event when either is not empty, so
// that a reasoning model's first reasoning token is its first token; the
// first chunk's delta, commonly only a role with an empty content, is
// therefore no text event.
func ParseStreamAPI(r io.Reader, api API, now func() time.Time) (StreamResult, error) {
	var res StreamResult
	var text strings.Builder
	dec := &lineDecoder{api: api} // reused: decoding into it keeps the choices slice
	// A small buffer: SSE lines are short, and a per-response 64 KiB buffer
	// was most of the client's allocation. Longer lines are assembled below.
	br := bufio.NewReaderSize(r, 4<<10)
	var long []byte
	for {
		frag, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// Part of a long line: keep it up to the bound, then give up on
			// the line.
			if long != nil || len(frag) > 0 {
				if len(long) <= MaxSSELine {
					long = append(long, frag...)
				}
			}
			continue
		}
		line := frag
		if long != nil {
			if len(long) <= MaxSSELine {
				long = append(long, frag...)
			}
			line = long
		}
		if len(line) > 0 {
			if len(line) > MaxSSELine {
				res.Malformed++
			} else if stop := res.handleLine(line, now, &text, dec); stop {
				res.Done = true
				break
			}
		}
		long = nil
		if err == io.EOF {
			break
		}
		if err != nil {
			res.Text = text.String()
			return res, err
		}
	}
	res.Text = text.String()
	return res, nil
}

// chunkView is what the parser takes from one chunk, whatever its API.
type chunkView struct {
	choice    bool   // choices had a first element; the rest is its
	text      string // text (completions) or delta.content (chat)
	reasoning string // chat: delta.reasoning_content, else delta.reasoning
	finish    *string
	usage     *Usage
	err       json.RawMessage
}

// lineDecoder decodes the data lines of one stream into views, reusing
// one chunk (and its choices slice) across lines.
type lineDecoder struct {
	api  API
	comp sseChunk
	chat chatChunk
}

// decode decodes one data line (a JSON object) into v; false when it is
// not a valid chunk.
func (d *lineDecoder) decode(data []byte, v *chunkView) bool {
	if d.api == APIChat {
		return d.decodeChat(data, v)
	}
	return d.decodeCompletion(data, v)
}

func (c *sseChunk) reset() {
	// Zero the reused elements: encoding/json leaves fields that a chunk
	// does not mention as they were, which would repeat an earlier text.
	clear(c.Choices[:cap(c.Choices)])
	c.Choices, c.Usage, c.Error = c.Choices[:0], nil, nil
}

// decodeCompletion decodes data into the reused completions chunk and its
// view.
func (d *lineDecoder) decodeCompletion(data []byte, v *chunkView) bool {
	c := &d.comp
	c.reset()
	if !fastChunk(data, c) {
		c.reset()
		if json.Unmarshal(data, c) != nil {
			return false
		}
	}
	*v = chunkView{usage: c.Usage, err: c.Error}
	if len(c.Choices) > 0 {
		ch := &c.Choices[0]
		v.choice, v.text, v.finish = true, ch.Text, ch.FinishReason
	}
	return true
}

// handleLine processes one line and reports whether it was [DONE].
func (res *StreamResult) handleLine(line []byte, now func() time.Time, text *strings.Builder, dec *lineDecoder) bool {
	line = bytes.TrimSpace(line)
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return false // comments, event:, id:, retry: and blank separators
	}
	data = bytes.TrimSpace(data)
	if string(data) == "[DONE]" {
		return true
	}
	var v chunkView
	if len(data) == 0 || data[0] != '{' || !dec.decode(data, &v) {
		res.Malformed++
		return false
	}
	if msg := errorMessage(v.err); msg != "" && res.Error == "" {
		res.Error = msg
	}
	if v.usage != nil {
		res.UsageSeen = true
		if v.usage.PromptTokens != nil {
			res.Usage.PromptTokens = v.usage.PromptTokens
		}
		if v.usage.CompletionTokens != nil {
			res.Usage.CompletionTokens = v.usage.CompletionTokens
		}
	}
	if !v.choice {
		return false
	}
	if v.finish != nil {
		res.FinishReason = v.finish
	}
	if v.text == "" && v.reasoning == "" {
		return false
	}
	t := now()
	if res.TextEvents == 0 {
		res.FirstText = t
	} else {
		res.Gaps = append(res.Gaps, t.Sub(res.LastText))
	}
	res.LastText = t
	res.TextEvents++
	text.WriteString(v.reasoning)
	text.WriteString(v.text)
	return false
}
