package model

import (
	"reflect"
	"testing"

	"github.com/tinyserve/tinyserve/internal/fuzzseed"
)

// FuzzParseConfig: any config.json gives a Config or an error, never a
// panic; an accepted Config passes Validate (so the loader's size
// arithmetic cannot overflow) and survives MarshalConfig and ParseConfig
// unchanged (the built-in model's config.json is written that way). Seeds:
// the fixtures' config.json files and testdata/fuzz/FuzzParseConfig.
func FuzzParseConfig(f *testing.F) {
	if fuzzseed.AddFiles(f, "../../testdata/*/config.json") == 0 {
		f.Fatal("no seed files: the fixtures are missing")
	}
	f.Add([]byte(`{"vocab_size":5,"n_ctx":4,"n_embd":4,"n_layer":1,"n_head":2,"n_inner":null,"bos_token_id":null}`))
	// An empty list of EOS ids is none, as null is, and must round-trip
	// as such.
	f.Add([]byte(`{"architectures":["LlamaForCausalLM"],"hidden_size":8,"intermediate_size":8,"num_hidden_layers":1,"num_attention_heads":2,"eos_token_id":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			return
		}
		again := c
		if err := again.Validate(); err != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("accepted config fails Validate or changes under it: %v\n%+v\n%+v", err, c, again)
		}
		b, err := MarshalConfig(c)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseConfig(b)
		if err != nil {
			t.Fatalf("MarshalConfig wrote a config ParseConfig refuses: %v\n%s", err, b)
		}
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip changed the config:\n%+v\n%+v", c, back)
		}
	})
}
