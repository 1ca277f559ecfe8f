package loadgen

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFastChunkAgreesWithEncodingJSON feeds tricky chunks to the fast path
// and to encoding/json: whenever the fast path claims a chunk, its result
// must be exactly encoding/json's; and the common vLLM shapes must be
// claimed, or the fast path is not doing its job.
func TestFastChunkAgreesWithEncodingJSON(t *testing.T) {
	cases := []struct {
		in    string
		claim bool // the fast path must handle it itself
	}{
		{`{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" the","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}`, true},
		{`{"id":"c","choices":[{"index":0,"text":"","finish_reason":"length","stop_reason":null}]}`, true},
		{`{"id":"c","object":"text_completion","choices":[],"usage":{"prompt_tokens":128,"total_tokens":160,"completion_tokens":32,"prompt_tokens_details":null}}`, true},
		{`{"choices":[{"text":"a"},{"text":"b","finish_reason":"stop"}]}`, true},
		{`{"choices":[{"text":"é😀"}]}`, true},
		{` { "choices" : [ { "text" : "x" } ] , "x" : [1, -2.5e3, true, false, null, {"a": "\u00e9\n"}] } `, true},
		{`{}`, true},
		{`{"choices":null,"usage":{}}`, true},
		{`{"usage":{"prompt_tokens":-0,"completion_tokens":null}}`, true},
		// Everything below may fall back; the result must still agree.
		{`{"choices":[{"text":"a\nb"}]}`, false},
		{`{"choices":[{"text":"\ud83d\ude00"}]}`, false},
		{`{"Choices":[{"text":"folded key"}]}`, false},
		{`{"choiceſ":[{"text":"unicode-folded key"}]}`, false},
		{`{"choices":[{"TEXT":"folded inner key"}]}`, false},
		{`{"choices":[{"text":"a"}],"choices":[{"text":"b"}]}`, false},
		{`{"choices":[{"text":"a","text":"b"}]}`, false},
		{`{"choices":[null,{"text":"b"}]}`, false},
		{`{"choices":[{"text":5}]}`, false},
		{`{"choices":[{"text":"a"},{"text":5}]}`, false},
		{`{"choices":"x"}`, false},
		{`{"error":{"message":"boom","code":500}}`, false},
		{`{"choices":[{"text":"a"}],"ERROR":"folded"}`, false},
		{`{"usage":{"completion_tokens":3.0}}`, false},
		{`{"usage":{"completion_tokens":1e2}}`, false},
		{`{"usage":{"completion_tokens":012}}`, false},
		{`{"usage":{"completion_tokens":"7"}}`, false},
		{`{"usage":{"completion_tokens":99999999999999999999}}`, false},
		{`{"choices":[{"text":"a"}]} trailing`, false},
		{`{"choices":[{"text":"a"}],}`, false},
		{`{"choices":[{"text":"a"},]}`, false},
		// A repeated key whose later value is null: encoding/json makes the
		// pointer nil again, so the fast path must not keep the first value.
		{`{"choices":[{"text":"a","finish_reason":"stop","finish_reason":null}]}`, false},
		{`{"usage":{"prompt_tokens":1,"prompt_tokens":null}}`, false},
		{`{"usage":{"completion_tokens":1,"completion_tokens":null}}`, false},
		{`{"x":[1,]}`, false},
		{`{"x":01}`, false},
		{`{"x":"\x"}`, false},
		{`{"choices":[{"text":"` + "\xff" + `"}]}`, false},
		{`{"x":` + deep(150) + `}`, false},
	}
	for _, c := range cases {
		var fast sseChunk
		claimed := fastChunk([]byte(c.in), &fast)
		if c.claim {
			assert.True(t, claimed, "fast path should handle %s", c.in)
		}
		var ref sseChunk
		refErr := json.Unmarshal([]byte(c.in), &ref)
		if claimed {
			require.NoError(t, refErr, "fast path accepted what encoding/json rejects: %s", c.in)
			if len(ref.Choices) == 0 && len(fast.Choices) == 0 {
				ref.Choices, fast.Choices = nil, nil // empty and nil are the same to the parser
			}
			assert.Equal(t, ref, fast, "%s", c.in)
		}
		// And through the parser, whatever path it takes.
		r, err := ParseStream(stringsReader("data: "+c.in+"\n"), fakeClock())
		require.NoError(t, err)
		if refErr != nil {
			assert.Equal(t, 1, r.Malformed, "%s", c.in)
		} else {
			assert.Equal(t, 0, r.Malformed, "%s", c.in)
			if len(ref.Choices) > 0 {
				assert.Equal(t, ref.Choices[0].Text, r.Text, "%s", c.in)
			}
		}
	}
}

func deep(n int) string {
	s := ""
	for range n {
		s += "["
	}
	for range n {
		s += "]"
	}
	return s
}
