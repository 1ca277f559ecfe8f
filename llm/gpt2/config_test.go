package gpt2

import (
	"strings"
	"testing"
)

func TestParseConfig(t *testing.T) {
	base := `"vocab_size":50257,"n_positions":1024,"n_embd":768,"n_layer":12,"n_head":12`
	tests := []struct {
		name string
		json string
		want func(c *Config) // adjusts the expected defaults
		err  string
	}{
		{"defaults", `{` + base + `}`, func(c *Config) {}, ""},
		{"hf gpt2", `{"model_type":"gpt2",` + base + `,"n_inner":null,"activation_function":"gelu_new","layer_norm_epsilon":1e-05,"bos_token_id":50256,"eos_token_id":50256}`,
			func(c *Config) { c.BOSTokenID, c.EOSTokenID = 50256, 50256 }, ""},
		{"n_inner", `{` + base + `,"n_inner":1000}`, func(c *Config) { c.NInner = 1000 }, ""},
		{"pytorch tanh gelu", `{` + base + `,"activation_function":"gelu_pytorch_tanh"}`, func(c *Config) {}, ""},
		{"erf gelu", `{` + base + `,"activation_function":"gelu"}`, func(c *Config) { c.Activation = GeluErf }, ""},
		{"epsilon", `{` + base + `,"layer_norm_epsilon":1e-6}`, func(c *Config) { c.LayerNormEpsilon = 1e-6 }, ""},
		{"unscaled attention", `{` + base + `,"scale_attn_weights":false,"scale_attn_by_inverse_layer_idx":true}`,
			func(c *Config) { c.ScaleAttnWeights, c.ScaleAttnByInverseLayerIdx = false, true }, ""},
		{"n_ctx only", `{"vocab_size":50257,"n_ctx":1024,"n_embd":768,"n_layer":12,"n_head":12}`, func(c *Config) {}, ""},
		{"other model", `{"model_type":"llama",` + base + `}`, nil, `model_type "llama"`},
		{"relu", `{` + base + `,"activation_function":"relu"}`, nil, `activation_function "relu"`},
		{"heads", `{"vocab_size":5,"n_positions":4,"n_embd":10,"n_layer":1,"n_head":3}`, nil, "not a multiple"},
		{"missing shape", `{"vocab_size":5}`, nil, "n_positions must be positive"},
		{"eos out of range", `{` + base + `,"eos_token_id":50257}`, nil, "out of vocabulary"},
		{"negative bos", `{` + base + `,"bos_token_id":-5}`, nil, "out of vocabulary"},
		{"huge", `{"vocab_size":5,"n_positions":4,"n_embd":1073741824,"n_layer":1,"n_head":1}`, nil, "implausibly large"},
		{"bad epsilon", `{` + base + `,"layer_norm_epsilon":0}`, nil, "layer_norm_epsilon"},
		{"not json", `{`, nil, "parse"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseConfig([]byte(tc.json))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseConfig = %+v, %v; want error %q", got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := Config{VocabSize: 50257, NPositions: 1024, NEmbd: 768, NLayer: 12, NHead: 12, NInner: 3072,
				LayerNormEpsilon: 1e-5, Activation: GeluTanh, ScaleAttnWeights: true, BOSTokenID: -1, EOSTokenID: -1}
			tc.want(&want)
			if got != want {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
			// What marshalConfig writes parses back to the same config.
			js, err := marshalConfig(got)
			if err != nil {
				t.Fatal(err)
			}
			if back, err := ParseConfig(js); err != nil || back != got {
				t.Errorf("round trip: %+v, %v", back, err)
			}
		})
	}
}

func TestBuiltin(t *testing.T) {
	m, err := Builtin(BuiltinTiny)
	if err != nil {
		t.Fatal(err)
	}
	info := m.Info()
	if info.ID != "tiny-gpt2" || !info.RandomWeights || info.VocabSize != 50257 || info.MaxModelLen != 1024 || info.EOSTokenID != 50256 {
		t.Errorf("Info %+v", info)
	}
	again, err := Builtin(BuiltinTiny)
	if err != nil {
		t.Fatal(err)
	}
	if err := equalWeights(m.Weights, again.Weights); err != nil {
		t.Errorf("two builds differ: %v", err)
	}
	other, err := NewRandom(BuiltinTiny, m.Config, BuiltinSeed+1, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	if equalWeights(m.Weights, other.Weights) == nil {
		t.Error("another seed gives the same weights")
	}
	if _, err := Builtin("gpt5"); err == nil || !strings.Contains(err.Error(), "unknown built-in model") {
		t.Errorf("Builtin(gpt5) error %v", err)
	}
	for _, name := range BuiltinNames() {
		if !IsBuiltin(name) {
			t.Errorf("IsBuiltin(%q) false", name)
		}
	}
	if IsBuiltin("./tiny-gpt2") {
		t.Error("a path is reported as built-in")
	}

	cfg, err := BuiltinConfig(Builtin124M)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NLayer != 12 || cfg.NEmbd != 768 || cfg.NHead != 12 || cfg.NInner != 3072 || cfg.NPositions != 1024 || cfg.VocabSize != 50257 {
		t.Errorf("124M config %+v", cfg)
	}
	if raceEnabled {
		return // generating 124M weights under the race detector takes minutes
	}
	big, err := Builtin(Builtin124M)
	if err != nil {
		t.Fatal(err)
	}
	if n := big.NumParams(); n != 124439808 {
		t.Errorf("124M NumParams %d, want 124439808", n)
	}
	if !big.Info().RandomWeights {
		t.Error("124M not marked random")
	}
}

func TestOpen(t *testing.T) {
	m, err := Open(BuiltinTiny)
	if err != nil || !m.RandomWeights || m.Name != BuiltinTiny {
		t.Fatalf("Open(tiny-gpt2) = %v, %v", m, err)
	}
	m, err = Open(fixtures + "/gpt2-tiny")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.RandomWeights || m.Name != "gpt2-tiny" || m.Config.NEmbd != 64 {
		t.Errorf("Open(folder): name %q random %v n_embd %d", m.Name, m.RandomWeights, m.Config.NEmbd)
	}
	if _, err := Open(t.TempDir() + "/nothing"); err == nil {
		t.Error("Open of a missing folder succeeded")
	}
	// A mistyped built-in name is told what the built-in names are.
	if _, err := Open("tiny-gpt3"); err == nil || !strings.Contains(err.Error(), BuiltinTiny+", "+Builtin124M) {
		t.Errorf("Open(tiny-gpt3) = %v, want an error listing the built-in models", err)
	}
}
