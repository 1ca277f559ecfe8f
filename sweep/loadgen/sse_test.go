package loadgen

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeClock advances one millisecond per call, so gaps are exact.
func fakeClock() func() time.Time {
	t := time.Unix(1000, 0)
	return func() time.Time { t = t.Add(time.Millisecond); return t }
}

func TestParseStreamWellFormed(t *testing.T) {
	in := "data: {\"choices\":[{\"text\":\"Hel\",\"finish_reason\":null}]}\n\n" +
		": keep-alive comment\n\n" +
		"data: {\"choices\":[{\"text\":\"\"}]}\n\n" + // empty text: not a text event
		"data:{\"choices\":[{\"text\":\"lo\"}]}\r\n\r\n" + // no space, CRLF
		"data: {\"choices\":[{\"text\":\"!\",\"finish_reason\":\"length\"}]}\n\n" +
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3}}\n\n" +
		"data: [DONE]\n\n" +
		"data: {\"choices\":[{\"text\":\"after done\"}]}\n\n"
	r, err := ParseStream(strings.NewReader(in), fakeClock())
	require.NoError(t, err)
	assert.Equal(t, "Hello!", r.Text)
	assert.Equal(t, 3, r.TextEvents)
	assert.Equal(t, []time.Duration{time.Millisecond, time.Millisecond}, r.Gaps)
	assert.Equal(t, 2*time.Millisecond, r.LastText.Sub(r.FirstText))
	require.NotNil(t, r.FinishReason)
	assert.Equal(t, "length", *r.FinishReason)
	require.True(t, r.UsageSeen)
	assert.Equal(t, 3, *r.Usage.CompletionTokens)
	assert.Equal(t, 7, *r.Usage.PromptTokens)
	assert.Equal(t, 0, r.Malformed)
	assert.True(t, r.Done)
}

func TestParseStreamMalformed(t *testing.T) {
	cases := []struct {
		name      string
		in        string
		text      string
		malformed int
		done      bool
	}{
		{"bad json", "data: {not json}\n\ndata: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: [DONE]\n", "a", 1, true},
		{"array instead of object", "data: [1,2]\ndata: 42\ndata: \"x\"\n", "", 3, false},
		{"empty data", "data:\n\n", "", 1, false},
		{"truncated without done", "data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {\"choi", "a", 1, false},
		{"wrong types", "data: {\"choices\":[{\"text\":5}]}\ndata: {\"choices\":\"x\"}\n", "", 2, false},
		{"other fields ignored", "event: message\nid: 3\nretry: 10\ndata: {\"choices\":[{\"text\":\"b\"}]}\n", "b", 0, false},
		{"no trailing newline", "data: {\"choices\":[{\"text\":\"c\"}]}", "c", 0, false},
		{"done with spaces", "data:   [DONE]  \n", "", 0, true},
		{"chunk without text repeats nothing", "data: {\"choices\":[{\"text\":\"a\"}]}\ndata: {\"choices\":[{\"index\":0}]}\n", "a", 0, false},
		{"error object", "data: {\"error\":{\"message\":\"boom\"}}\n", "", 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := ParseStream(strings.NewReader(c.in), fakeClock())
			require.NoError(t, err)
			assert.Equal(t, c.text, r.Text)
			assert.Equal(t, c.malformed, r.Malformed)
			assert.Equal(t, c.done, r.Done)
		})
	}
}

func TestParseStreamLongLine(t *testing.T) {
	long := "data: {\"choices\":[{\"text\":\"" + strings.Repeat("x", MaxSSELine) + "\"}]}\n"
	ok := "data: {\"choices\":[{\"text\":\"y\"}]}\n"
	r, err := ParseStream(strings.NewReader(long+ok), fakeClock())
	require.NoError(t, err)
	assert.Equal(t, 1, r.Malformed, "an over-long line is one malformed event")
	assert.Equal(t, "y", r.Text)

	// A line longer than the read buffer but within the bound is kept.
	mid := "data: {\"choices\":[{\"text\":\"" + strings.Repeat("z", 200<<10) + "\"}]}\n"
	r, err = ParseStream(strings.NewReader(mid), fakeClock())
	require.NoError(t, err)
	assert.Equal(t, 200<<10, len(r.Text))
}

// TestParseStreamErrorObject: an event with an error member (vLLM's way of
// failing after the 200 header) is remembered with its message, whatever
// shape the member has; a null one is no error.
func TestParseStreamErrorObject(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"error":{"object":"error","message":"boom","type":"InternalServerError","code":500}}`, "boom"},
		{`{"error":"plain text"}`, "plain text"},
		{`{"error":{"code":7}}`, `{"code":7}`},
		{`{"Error":{"message":"folded"}}`, "folded"},
		{`{"error":null,"choices":[{"text":"a"}]}`, ""},
	}
	for _, c := range cases {
		in := "data: {\"choices\":[{\"text\":\"x\"}]}\n\ndata: " + c.in + "\n\ndata: {\"error\":{\"message\":\"second\"}}\n\ndata: [DONE]\n\n"
		if c.want == "" {
			in = "data: " + c.in + "\n\ndata: [DONE]\n\n"
		}
		r, err := ParseStream(strings.NewReader(in), fakeClock())
		require.NoError(t, err)
		assert.Equal(t, c.want, r.Error, c.in)
		assert.Zero(t, r.Malformed, c.in)
		assert.True(t, r.Done, c.in)
	}
}

type failingReader struct{ data io.Reader }

func (f failingReader) Read(p []byte) (int, error) {
	n, err := f.data.Read(p)
	if err == io.EOF {
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

func TestParseStreamTransportError(t *testing.T) {
	r, err := ParseStream(failingReader{strings.NewReader("data: {\"choices\":[{\"text\":\"a\"}]}\n")}, fakeClock())
	require.True(t, errors.Is(err, io.ErrUnexpectedEOF))
	assert.Equal(t, "a", r.Text)
}

// FuzzParseStream checks invariants that must hold for any byte stream,
// read as completions and as chat: no panic, text events and gaps agree,
// the text is the concatenation of text events (never longer than the
// input), counts are bounded by the number of lines, and the parser (fast
// path included) agrees with a plain reference.
func FuzzParseStream(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: [DONE]\n"))
	f.Add([]byte("data: {\"choices\":[{\"text\":\"a\",\"finish_reason\":\"stop\"}],\"usage\":{\"completion_tokens\":1}}\r\n"))
	f.Add([]byte("data: {bad\ndata: [1]\n: comment\n"))
	f.Add([]byte("data:{\"choices\":[{\"text\":\"\\u00e9\"}]}"))
	f.Add([]byte("data: {\"error\":{\"message\":\"boom\"}}\n\ndata: [DONE]\n"))
	f.Add([]byte("data: " + chatRoleChunk + "\n\ndata: " + chatTokenChunk + "\n\ndata: " + chatFinishChunk + "\n\ndata: " + chatUsageChunk + "\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"a\",\"reasoning\":\"b\",\"content\":\"c\"}}]}\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, api := range []API{APICompletions, APIChat} {
			checkParseStream(t, in, api)
		}
	})
}

func checkParseStream(t *testing.T, in []byte, api API) {
	r, err := ParseStreamAPI(strings.NewReader(string(in)), api, fakeClock())
	if err != nil {
		t.Fatalf("%s: reader of a complete input failed: %v", api, err)
	}
	lines := strings.Count(string(in), "\n") + strings.Count(string(in), "\r") + 1
	if r.TextEvents > lines || r.Malformed > lines {
		t.Fatalf("%s: more events than lines: %+v", api, r)
	}
	if r.TextEvents == 0 && (len(r.Gaps) != 0 || r.Text != "") {
		t.Fatalf("%s: text without text events: %+v", api, r)
	}
	if r.TextEvents > 0 && len(r.Gaps) != r.TextEvents-1 {
		t.Fatalf("%s: %d text events but %d gaps", api, r.TextEvents, len(r.Gaps))
	}
	if r.TextEvents > 0 && r.LastText.Before(r.FirstText) {
		t.Fatalf("%s: last text before first", api)
	}
	if len(r.Text) > 6*len(in) { // \u escapes can grow at most this much
		t.Fatalf("%s: text longer than possible: %d > %d", api, len(r.Text), len(in))
	}
	ref := parseStreamReference(in, api)
	got := referenceResult{text: r.Text, events: r.TextEvents, malformed: r.Malformed, done: r.Done, usage: r.UsageSeen, errMsg: r.Error,
		finish: derefAny(r.FinishReason), prompt: derefAny(r.Usage.PromptTokens), completion: derefAny(r.Usage.CompletionTokens)}
	if got != ref {
		t.Fatalf("%s: parser and reference differ:\nparser    %+v\nreference %+v", api, got, ref)
	}
}

type referenceResult struct {
	text                       string
	events                     int
	malformed                  int
	done, usage                bool
	errMsg                     string
	finish, prompt, completion any
}

func derefAny[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// parseStreamReference is the obviously right version of ParseStream (or
// ParseChatStream) for the differential check: split into lines, decode
// every data line into a fresh value, no buffers reused.
func parseStreamReference(in []byte, api API) referenceResult {
	var r referenceResult
	for _, line := range strings.Split(string(in), "\n") {
		line = strings.TrimSpace(line)
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			r.done = true
			break
		}
		c, ok := referenceChunk(data, api)
		if !ok {
			r.malformed++
			continue
		}
		if msg := errorMessage(c.err); msg != "" && r.errMsg == "" {
			r.errMsg = msg
		}
		if c.usage != nil {
			r.usage = true
			if c.usage.PromptTokens != nil {
				r.prompt = *c.usage.PromptTokens
			}
			if c.usage.CompletionTokens != nil {
				r.completion = *c.usage.CompletionTokens
			}
		}
		if c.choice && c.finish != nil {
			r.finish = *c.finish
		}
		if c.choice && c.text != "" {
			r.events++
			r.text += c.text
		}
	}
	return r
}

// referenceChunk decodes one data line of api with encoding/json alone:
// text is what the chunk adds to the answer (for chat, the reasoning
// before the content).
func referenceChunk(data string, api API) (c struct {
	choice bool
	text   string
	finish *string
	usage  *Usage
	err    json.RawMessage
}, ok bool) {
	if !strings.HasPrefix(data, "{") {
		return c, false
	}
	if api == APIChat {
		var cc chatChunk
		if json.Unmarshal([]byte(data), &cc) != nil {
			return c, false
		}
		c.usage, c.err = cc.Usage, cc.Error
		if len(cc.Choices) > 0 {
			d := cc.Choices[0].Delta
			reasoning := d.ReasoningContent
			if reasoning == "" {
				reasoning = d.Reasoning
			}
			c.choice, c.text, c.finish = true, reasoning+d.Content, cc.Choices[0].FinishReason
		}
		return c, true
	}
	var sc sseChunk
	if json.Unmarshal([]byte(data), &sc) != nil {
		return c, false
	}
	c.usage, c.err = sc.Usage, sc.Error
	if len(sc.Choices) > 0 {
		c.choice, c.text, c.finish = true, sc.Choices[0].Text, sc.Choices[0].FinishReason
	}
	return c, true
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }
