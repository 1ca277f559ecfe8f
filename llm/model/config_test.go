package model

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fixtures is the repository's top-level test fixture folder.
const fixtures = "../../testdata"

func TestParseGPT2Config(t *testing.T) {
	base := `"vocab_size":50257,"n_positions":1024,"n_embd":768,"n_layer":12,"n_head":12`
	tests := []struct {
		name string
		json string
		want func(c *Config) // adjusts the expected defaults
		err  string
	}{
		{"defaults", `{` + base + `}`, func(c *Config) {}, ""},
		{"hf gpt2", `{"model_type":"gpt2","architectures":["GPT2LMHeadModel"],` + base + `,"n_inner":null,"activation_function":"gelu_new","layer_norm_epsilon":1e-05,"bos_token_id":50256,"eos_token_id":50256}`,
			func(c *Config) { c.BOSTokenID, c.EOSTokenIDs = 50256, []int{50256} }, ""},
		{"n_inner", `{` + base + `,"n_inner":1000}`, func(c *Config) { c.Intermediate = 1000 }, ""},
		{"pytorch tanh gelu", `{` + base + `,"activation_function":"gelu_pytorch_tanh"}`, func(c *Config) {}, ""},
		{"erf gelu", `{` + base + `,"activation_function":"gelu"}`, func(c *Config) { c.Activation = GeluErf }, ""},
		{"epsilon", `{` + base + `,"layer_norm_epsilon":1e-6}`, func(c *Config) { c.NormEps = 1e-6 }, ""},
		{"unscaled attention", `{` + base + `,"scale_attn_weights":false,"scale_attn_by_inverse_layer_idx":true}`,
			func(c *Config) { c.AttnScale, c.ScaleAttnByInverseLayerIdx = 1, true }, ""},
		{"n_ctx only", `{"vocab_size":50257,"n_ctx":1024,"n_embd":768,"n_layer":12,"n_head":12}`, func(c *Config) {}, ""},
		{"untied", `{` + base + `,"tie_word_embeddings":false}`, func(c *Config) { c.TiedEmbeddings = false }, ""},
		{"torch_dtype", `{` + base + `,"torch_dtype":"float16"}`, func(c *Config) { c.TorchDType = "float16" }, ""},
		{"other model", `{"model_type":"mistral",` + base + `}`, nil, `model_type "mistral" is not supported`},
		{"relu", `{` + base + `,"activation_function":"relu"}`, nil, `activation_function "relu"`},
		{"heads", `{"model_type":"gpt2","vocab_size":5,"n_positions":4,"n_embd":10,"n_layer":1,"n_head":3}`, nil, "not a multiple"},
		{"missing shape", `{"model_type":"gpt2","vocab_size":5}`, nil, "must be positive"},
		{"eos out of range", `{` + base + `,"eos_token_id":50257}`, nil, "out of vocabulary"},
		{"negative bos", `{` + base + `,"bos_token_id":-5}`, nil, "out of vocabulary"},
		{"huge", `{"model_type":"gpt2","vocab_size":5,"n_positions":4,"n_embd":1073741824,"n_layer":1,"n_head":1}`, nil, "implausibly large"},
		{"bad epsilon", `{` + base + `,"layer_norm_epsilon":0}`, nil, "epsilon"},
		{"not json", `{`, nil, "parse"},
		{"not an object", `[1]`, nil, "parse"},
		{"wrong type", `{` + base + `,"n_layer":"twelve"}`, nil, "n_layer"},
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
			want := gpt2Builtin(12, 768, 12)
			want.BOSTokenID, want.EOSTokenIDs, want.TorchDType = -1, nil, ""
			tc.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
			checkRoundTrip(t, got)
		})
	}
}

// checkRoundTrip: what MarshalConfig writes parses back to the same
// config (the built-in models' config.json is written that way).
func checkRoundTrip(t *testing.T, c Config) {
	t.Helper()
	js, err := MarshalConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseConfig(js)
	if err != nil {
		t.Fatalf("round trip: %v\n%s", err, js)
	}
	if !reflect.DeepEqual(back, c) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, c)
	}
}

// TestParseLlamaFamily reads the three tiny checkpoints' config.json files
// (as the hub writes them) and checks every choice each architecture makes.
func TestParseLlamaFamily(t *testing.T) {
	tests := []struct {
		dir  string
		want Config
	}{
		{"qwen2-tiny", Config{Arch: ArchQwen2, Architecture: "Qwen2ForCausalLM", VocabSize: 151936, Hidden: 32, Layers: 2, Heads: 2, KVHeads: 1,
			HeadDim: 16, Intermediate: 64, MaxPositions: 4096, Norm: RMSNorm, NormEps: 1e-6, Rotary: true, RopeTheta: 1e6,
			QKVBias: true, MLP: MLPGated, Activation: SiLU, AttnScale: 0.25, TiedEmbeddings: true,
			BOSTokenID: 151643, EOSTokenIDs: []int{151643}, TorchDType: "bfloat16"}},
		{"llama-tiny", Config{Arch: ArchLlama, Architecture: "LlamaForCausalLM", VocabSize: 128256, Hidden: 32, Layers: 2, Heads: 2, KVHeads: 1,
			HeadDim: 16, Intermediate: 64, MaxPositions: 131072, Norm: RMSNorm, NormEps: 1e-5, Rotary: true, RopeTheta: 500000,
			RopeScaling: Llama3Scaling{Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 8192},
			MLP:         MLPGated, Activation: SiLU, AttnScale: 0.25, TiedEmbeddings: true,
			BOSTokenID: 128000, EOSTokenIDs: []int{128001}, TorchDType: "bfloat16"}},
		{"qwen3-tiny", Config{Arch: ArchQwen3, Architecture: "Qwen3ForCausalLM", VocabSize: 151936, Hidden: 32, Layers: 2, Heads: 4, KVHeads: 2,
			HeadDim: 16, Intermediate: 64, MaxPositions: 40960, Norm: RMSNorm, NormEps: 1e-6, Rotary: true, RopeTheta: 1e6,
			QKNorm: true, MLP: MLPGated, Activation: SiLU, AttnScale: 0.25, TiedEmbeddings: true,
			BOSTokenID: 151643, EOSTokenIDs: []int{151645}, TorchDType: "bfloat16"}},
	}
	for _, tc := range tests {
		t.Run(tc.dir, func(t *testing.T) {
			got, err := LoadConfig(filepath.Join(fixtures, tc.dir))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
			checkRoundTrip(t, got)
		})
	}
}

// TestLlamaFamilyDefaults: fields a config.json leaves out take the
// config class's defaults, which differ between the architectures.
func TestLlamaFamilyDefaults(t *testing.T) {
	shape := `"hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,"num_attention_heads":4`
	for _, tc := range []struct {
		arch             string
		headDim, kvHeads int
		qkvBias, qkNorm  bool
		positions, vocab int
		bos              int
		eos              []int
		tied             bool
		theta, eps       float64
	}{
		{"LlamaForCausalLM", 16, 4, false, false, 2048, 32000, 1, []int{2}, false, 10000, 1e-6},
		{"Qwen2ForCausalLM", 16, 4, true, false, 32768, 151936, -1, nil, false, 10000, 1e-6},
		{"Qwen3ForCausalLM", 128, 4, false, true, 32768, 151936, -1, nil, false, 10000, 1e-6},
	} {
		c, err := ParseConfig([]byte(`{"architectures":["` + tc.arch + `"],` + shape + `}`))
		if err != nil {
			t.Fatalf("%s: %v", tc.arch, err)
		}
		if c.HeadDim != tc.headDim || c.KVHeads != tc.kvHeads || c.QKVBias != tc.qkvBias || c.QKNorm != tc.qkNorm ||
			c.MaxPositions != tc.positions || c.VocabSize != tc.vocab || c.BOSTokenID != tc.bos || !reflect.DeepEqual(c.EOSTokenIDs, tc.eos) ||
			c.TiedEmbeddings != tc.tied || c.RopeTheta != tc.theta || c.NormEps != tc.eps {
			t.Errorf("%s: %+v", tc.arch, c)
		}
	}
	// bos_token_id null means none, not the class default.
	c, err := ParseConfig([]byte(`{"architectures":["LlamaForCausalLM"],` + shape + `,"bos_token_id":null,"eos_token_id":[7,9]}`))
	if err != nil || c.BOSTokenID != -1 || !reflect.DeepEqual(c.EOSTokenIDs, []int{7, 9}) {
		t.Errorf("null bos, listed eos: %+v, %v", c, err)
	}
	// transformers 5 keeps rope_theta in rope_parameters.
	c, err = ParseConfig([]byte(`{"architectures":["Qwen3ForCausalLM"],` + shape + `,"head_dim":16,"rope_parameters":{"rope_type":"default","rope_theta":1000000.0}}`))
	if err != nil || c.RopeTheta != 1e6 {
		t.Errorf("rope_parameters: %+v, %v", c, err)
	}
}

// TestParseConfigRefuses: a config asking for something not implemented is
// refused with an error naming the field and its value, never run
// approximately.
func TestParseConfigRefuses(t *testing.T) {
	shape := `"hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,"num_attention_heads":4`
	for _, tc := range []struct{ json, want string }{
		{`{"architectures":["MistralForCausalLM"],` + shape + `}`, `architectures: "MistralForCausalLM" is not supported`},
		{`{"architectures":["LlamaForCausalLM","Qwen2ForCausalLM"],` + shape + `}`, "lists several classes"},
		{`{"architectures":["LlamaForCausalLM"],"model_type":"qwen2",` + shape + `}`, `model_type "qwen2" does not match`},
		{`{"model_type":"gemma",` + shape + `}`, `model_type "gemma" is not supported`},
		{`{` + shape + `}`, "names no architecture"},
		{`{"architectures":["LlamaForCausalLM"],` + shape + `,"rope_scaling":{"rope_type":"yarn","factor":4}}`, `rope_scaling: rope_type "yarn" is not supported`},
		{`{"architectures":["LlamaForCausalLM"],` + shape + `,"rope_scaling":{"type":"linear","factor":4}}`, `rope_type "linear"`},
		{`{"architectures":["Qwen2ForCausalLM"],` + shape + `,"use_sliding_window":true,"sliding_window":4096,"max_window_layers":1}`, "use_sliding_window: true (sliding_window 4096 from layer 1 of 2)"},
		{`{"architectures":["Qwen3ForCausalLM"],` + shape + `,"layer_types":["full_attention","sliding_attention"]}`, `layer_types[1] is "sliding_attention"`},
		{`{"architectures":["LlamaForCausalLM"],` + shape + `,"hidden_act":"gelu"}`, `hidden_act "gelu" is not supported`},
		{`{"architectures":["Qwen2ForCausalLM"],` + shape + `,"quantization_config":{"quant_method":"gptq"}}`, "quantization_config"},
		{`{"architectures":["LlamaForCausalLM"],` + shape + `,"num_key_value_heads":3}`, "not a multiple of num_key_value_heads 3"},
		{`{"architectures":["LlamaForCausalLM"],` + shape + `,"partial_rotary_factor":0.5}`, "partial_rotary_factor 0.5"},
		{`{"architectures":["LlamaForCausalLM"],` + shape + `,"rope_scaling":{"rope_type":"llama3","factor":8}}`, "rope_scaling (llama3) needs"},
		{`{"architectures":["LlamaForCausalLM"],` + shape + `,"eos_token_id":"x"}`, "eos_token_id"},
	} {
		_, err := ParseConfig([]byte(tc.json))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n  err = %v, want it to contain %q", tc.json, err, tc.want)
		}
	}
	// A sliding window that no layer uses is not refused (Qwen2.5's
	// configs carry sliding_window with use_sliding_window false, and
	// max_window_layers past the last layer slides nowhere either).
	for _, extra := range []string{`"use_sliding_window":false,"sliding_window":1024`, `"use_sliding_window":true,"sliding_window":1024,"max_window_layers":2`} {
		if _, err := ParseConfig([]byte(`{"architectures":["Qwen2ForCausalLM"],` + shape + `,` + extra + `}`)); err != nil {
			t.Errorf("%s: %v", extra, err)
		}
	}
}

// TestInvFreq: the rotary frequencies equal the goldens' float64 ones, with
// Llama 3's scaling changing exactly the indices it lists.
func TestInvFreq(t *testing.T) {
	for _, dir := range []string{"llama-tiny", "qwen2-tiny", "qwen3-tiny"} {
		data, err := os.ReadFile(filepath.Join(fixtures, dir, "golden.json"))
		if err != nil {
			t.Fatal(err)
		}
		var g struct {
			Meta struct {
				Rope struct {
					InvFreq []float64 `json:"inv_freq"`
				} `json:"rope"`
			} `json:"meta"`
		}
		if err := json.Unmarshal(data, &g); err != nil {
			t.Fatal(err)
		}
		c, err := LoadConfig(filepath.Join(fixtures, dir))
		if err != nil {
			t.Fatal(err)
		}
		got := c.InvFreq()
		if len(got) != len(g.Meta.Rope.InvFreq) {
			t.Fatalf("%s: %d frequencies, golden %d", dir, len(got), len(g.Meta.Rope.InvFreq))
		}
		for i, want := range g.Meta.Rope.InvFreq {
			if math.Abs(got[i]-want) > 1e-15*want {
				t.Errorf("%s: inv_freq[%d] = %.17g, golden %.17g", dir, i, got[i], want)
			}
		}
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
	if err := equalWeights(m, again); err != nil {
		t.Errorf("two builds differ: %v", err)
	}
	other, err := NewRandom(BuiltinTiny, m.Config, RandomOptions{Seed: BuiltinSeed + 1, Std: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if equalWeights(m, other) == nil {
		t.Error("another seed gives the same weights")
	}
	if _, err := Builtin("gpt5"); err == nil || !strings.Contains(err.Error(), "unknown built-in model") {
		t.Errorf("Builtin(gpt5) error %v", err)
	}
	for _, name := range BuiltinNames() {
		if !IsBuiltin(name) {
			t.Errorf("IsBuiltin(%q) false", name)
		}
		c, err := BuiltinConfig(name)
		if err != nil {
			t.Fatal(err)
		}
		checkRoundTrip(t, c)
	}
	if IsBuiltin("./tiny-gpt2") {
		t.Error("a path is reported as built-in")
	}

	cfg, err := BuiltinConfig(Builtin124M)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Layers != 12 || cfg.Hidden != 768 || cfg.Heads != 12 || cfg.Intermediate != 3072 || cfg.MaxPositions != 1024 || cfg.VocabSize != 50257 {
		t.Errorf("124M config %+v", cfg)
	}
	if n := (&Model{Config: cfg}).NumParams(); n != 124439808 {
		t.Errorf("124M NumParams %d, want 124439808", n)
	}
	// Qwen2.5-0.5B's shape: 494,032,768 parameters (the embedding tied).
	q, err := BuiltinConfig(BuiltinQwen05B)
	if err != nil {
		t.Fatal(err)
	}
	if n := (&Model{Config: q}).NumParams(); n != 494032768 {
		t.Errorf("qwen2.5-0.5b NumParams %d, want 494032768", n)
	}
	if q.KVBytesPerToken(2) != 12288 {
		t.Errorf("qwen2.5-0.5b KV bytes per token in 16 bits: %d, want 12288 (24 layers, 2 KV heads of 64, keys and values)", q.KVBytesPerToken(2))
	}
}

func TestOpenWith(t *testing.T) {
	m, err := OpenWith(BuiltinTiny, OpenOptions{})
	if err != nil || !m.RandomWeights || m.Name != BuiltinTiny || m.Source.Tokenizer != "gpt2" {
		t.Fatalf("OpenWith(tiny-gpt2) = %+v, %v", m, err)
	}
	m, err = OpenWith(fixtures+"/gpt2-tiny", OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.RandomWeights || m.Name != "gpt2-tiny" || m.Config.Hidden != 64 || m.Source.Tokenizer != "" {
		t.Errorf("OpenWith(folder): name %q random %v hidden %d tokenizer %q", m.Name, m.RandomWeights, m.Config.Hidden, m.Source.Tokenizer)
	}
	// The fixture has no tokenizer.json of its own (it is 11 MB): a folder
	// of links to its files, with one added, stands in.
	qdir := t.TempDir()
	for _, f := range []string{"config.json", "generation_config.json", "model.safetensors", "tokenizer_config.json"} {
		abs, err := filepath.Abs(filepath.Join(fixtures, "qwen3-tiny", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(abs, filepath.Join(qdir, f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(qdir, "tokenizer.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	q, err := OpenWith(qdir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if q.Source.Tokenizer != filepath.Join(qdir, "tokenizer.json") {
		t.Errorf("qwen3-tiny: tokenizer %q, want the folder's tokenizer.json", q.Source.Tokenizer)
	}
	if ids := q.EOSTokenIDs(); !reflect.DeepEqual(ids, []int{151645, 151643}) {
		t.Errorf("qwen3-tiny stop ids %v, want config.json's then generation_config.json's", ids)
	}
	if _, err := OpenWith(t.TempDir()+"/nothing", OpenOptions{}); err == nil {
		t.Error("OpenWith of a missing folder succeeded")
	}
	// A mistyped built-in name is told what the built-in names are.
	if _, err := OpenWith("tiny-gpt3", OpenOptions{}); err == nil || !strings.Contains(err.Error(), BuiltinTiny+", "+Builtin124M) {
		t.Errorf("OpenWith(tiny-gpt3) = %v, want an error listing the built-in models", err)
	}
}
