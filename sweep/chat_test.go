package sweep

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tinyserve/tinyserve/sweep/loadgen"
)

// TestExtraBodyReservedKeysPerAPI: chat refuses the keys it sets itself
// (and max_tokens, their older name), completions' refusals are unchanged,
// and a key only the other API reads stays allowed.
func TestExtraBodyReservedKeysPerAPI(t *testing.T) {
	chat := loadgen.LoadOptions{URL: "http://h/v1/chat/completions", Model: "m", Concurrency: 1}
	comp := loadgen.LoadOptions{URL: "http://h/v1/completions", Model: "m", Concurrency: 1}
	for _, key := range []string{"messages", "max_completion_tokens", "max_tokens", "model", "stream", "stream_options", "temperature", "ignore_eos", "n", "best_of", "echo"} {
		o := chat
		o.ExtraBody = json.RawMessage(`{"` + key + `":1}`)
		assert.ErrorContains(t, o.Validate(), "extra_body."+key+": not allowed", key)
	}
	for key, refused := range map[string]bool{"prompt": true, "max_tokens": true, "messages": false, "max_completion_tokens": false} {
		o := comp
		o.ExtraBody = json.RawMessage(`{"` + key + `":1}`)
		if refused {
			assert.ErrorContains(t, o.Validate(), "extra_body."+key+": not allowed", key)
		} else {
			assert.NoError(t, o.Validate(), key)
		}
	}
	o := chat
	o.ExtraBody = json.RawMessage(`{"prompt":"x"}`)
	assert.NoError(t, o.Validate(), "chat servers do not read prompt")

	// A sweep config is checked against its url's API too.
	cfg := strings.Replace(string(sweepConfigJSON("http://h/v1/chat/completions", "p.jsonl", []int{1}, 1, 0, 1)),
		`"output_dir"`, `"extra_body": {"max_completion_tokens": 3}, "output_dir"`, 1)
	_, err := parseConfig([]byte(cfg))
	assert.ErrorContains(t, err, "extra_body.max_completion_tokens: not allowed")
}
