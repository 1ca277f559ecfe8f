package loadgen

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// vLLM's chat chunks, as its server streams them.
const (
	chatRoleChunk   = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`
	chatTokenChunk  = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" the"},"logprobs":null,"finish_reason":null}]}`
	chatFinishChunk = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"length","stop_reason":null}]}`
	chatUsageChunk  = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":30,"total_tokens":62,"completion_tokens":32}}`
)

func TestParseChatStream(t *testing.T) {
	in := "data: " + chatRoleChunk + "\n\n" + // role only: no text event
		": ping\n\n" +
		"data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"Let\"}}]}\n\n" +
		"data: {\"choices\":[{\"delta\":{\"reasoning\":\" me\"}}]}\n\n" + // newer vLLM's name
		"data: {\"choices\":[{\"delta\":{\"reasoning_content\":\" see\",\"reasoning\":\" see\"}}]}\n\n" + // both: counted once
		"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\r\n\r\n" +
		"data: {\"choices\":[{\"delta\":{\"content\":null}}]}\n\n" + // nothing new
		"data: {\"choices\":[{\"delta\":{\"content\":\"!\"},\"finish_reason\":\"stop\"}]}\n\n" +
		"data: " + chatUsageChunk + "\n\n" +
		"data: [DONE]\n\n" +
		"data: {\"choices\":[{\"delta\":{\"content\":\"after done\"}}]}\n\n"
	r, err := ParseStreamAPI(strings.NewReader(in), APIChat, fakeClock())
	require.NoError(t, err)
	assert.Equal(t, "Let me seeHi!", r.Text)
	assert.Equal(t, 5, r.TextEvents)
	assert.Equal(t, []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond, time.Millisecond}, r.Gaps)
	require.NotNil(t, r.FinishReason)
	assert.Equal(t, "stop", *r.FinishReason)
	assert.Equal(t, 32, *r.Usage.CompletionTokens)
	assert.Equal(t, 30, *r.Usage.PromptTokens)
	assert.True(t, r.Done)
	assert.Zero(t, r.Malformed)

	// The same chunks read as completions have no text: the API matters.
	r, err = ParseStream(strings.NewReader(in), fakeClock())
	require.NoError(t, err)
	assert.Zero(t, r.TextEvents)
	assert.Equal(t, "stop", *r.FinishReason)
}

// TestParseChatStreamOnlyRole: a stream whose only chunk is the role has
// no text event and no finish reason, which the client records as no
// content, as vLLM's benchmark would fail it.
func TestParseChatStreamOnlyRole(t *testing.T) {
	r, err := ParseStreamAPI(strings.NewReader("data: "+chatRoleChunk+"\n\ndata: [DONE]\n\n"), APIChat, fakeClock())
	require.NoError(t, err)
	assert.Zero(t, r.TextEvents)
	assert.Nil(t, r.FinishReason)
	assert.True(t, r.Done)
}

func TestParseChatStreamErrorsAndMalformed(t *testing.T) {
	in := "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n" +
		"data: {\"choices\":[{\"delta\":{\"content\":5}}]}\n\n" + // wrong type
		"data: {\"choices\":[{\"delta\":\"x\"}]}\n\n" + // wrong type
		"data: {trunc\n\n" +
		"data: {\"error\":{\"message\":\"boom\",\"code\":500}}\n\n" +
		"data: [DONE]\n\n"
	r, err := ParseStreamAPI(strings.NewReader(in), APIChat, fakeClock())
	require.NoError(t, err)
	assert.Equal(t, "a", r.Text)
	assert.Equal(t, 3, r.Malformed)
	assert.Equal(t, "boom", r.Error)
	assert.True(t, r.Done)
}

// TestFastChatChunkAgreesWithEncodingJSON is TestFastChunkAgreesWithEncodingJSON
// for chat chunks: vLLM's shapes must be claimed, and whatever is claimed
// must decode exactly as encoding/json decodes it.
func TestFastChatChunkAgreesWithEncodingJSON(t *testing.T) {
	cases := []struct {
		in    string
		claim bool
	}{
		{chatRoleChunk, true},
		{chatTokenChunk, true},
		{chatFinishChunk, true},
		{chatUsageChunk, true},
		{`{"choices":[{"index":0,"delta":{"reasoning_content":"hm","content":null}}]}`, true},
		{`{"choices":[{"delta":{"reasoning":"é😀"}},{"delta":{"content":"second choice"}}]}`, true},
		{`{"choices":[{"delta":null,"finish_reason":"stop"}]}`, true},
		{`{"choices":[{"delta":{"content":null,"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{\"a\":1}"}}]}}]}`, true},
		{`{"choices":[{}],"usage":null}`, true},
		{`{"choices":null}`, true},
		// Everything below may fall back; the result must still agree.
		{`{"choices":[{"delta":{"content":"a\nb"}}]}`, false},
		{`{"choices":[{"Delta":{"content":"folded"}}]}`, false},
		{`{"choices":[{"delta":{"Content":"folded"}}]}`, false},
		{`{"choices":[{"delta":{"REASONING_CONTENT":"folded"}}]}`, false},
		{`{"choices":[{"delta":{"content":"a","content":"b"}}]}`, false},
		{`{"choices":[{"delta":{"content":"a"},"delta":{"reasoning":"b"}}]}`, false},
		{`{"choices":[{"delta":{"content":5}}]}`, false},
		{`{"choices":[{"delta":"x"}]}`, false},
		{`{"choices":[{"delta":[]}]}`, false},
		{`{"choices":[{"finish_reason":7}]}`, false},
		{`{"choices":[null]}`, false},
		{`{"choices":[{"delta":{"content":"a"}}],"error":{"message":"boom"}}`, false},
		{`{"choices":[{"delta":{"content":"` + "\xff" + `"}}]}`, false},
		{`{"choices":[{"delta":{"content":"a"}}]} trailing`, false},
		{`{"choices":[{"delta":{"content":"a",}}]}`, false},
		{`{"choices":[{"delta":{"content":"a"}},]}`, false},
		{`{"choices":[{"delta":{},"finish_reason":"stop","finish_reason":null}]}`, false},
		{`{"choices":[{"delta":{"content":"a"}}],"usage":{"completion_tokens":1,"completion_tokens":null}}`, false},
	}
	for _, c := range cases {
		var fast chatChunk
		claimed := fastChatChunk([]byte(c.in), &fast)
		if c.claim {
			assert.True(t, claimed, "fast path should handle %s", c.in)
		}
		var ref chatChunk
		refErr := json.Unmarshal([]byte(c.in), &ref)
		if claimed {
			require.NoError(t, refErr, "fast path accepted what encoding/json rejects: %s", c.in)
			if len(ref.Choices) == 0 && len(fast.Choices) == 0 {
				ref.Choices, fast.Choices = nil, nil
			}
			assert.Equal(t, ref, fast, "%s", c.in)
		}
		r, err := ParseStreamAPI(strings.NewReader("data: "+c.in+"\n"), APIChat, fakeClock())
		require.NoError(t, err)
		if refErr != nil {
			assert.Equal(t, 1, r.Malformed, "%s", c.in)
			continue
		}
		assert.Equal(t, 0, r.Malformed, "%s", c.in)
		if len(ref.Choices) > 0 {
			d := ref.Choices[0].Delta
			assert.Equal(t, d.reasoning()+d.Content, r.Text, "%s", c.in)
		}
	}
}
