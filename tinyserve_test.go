package tinyserve

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/internal/syncbuf"
	"github.com/tinyserve/tinyserve/internal/testfiles"
	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/mock"
	"github.com/tinyserve/tinyserve/llm/model"
	"github.com/tinyserve/tinyserve/llm/tensor"
	"github.com/tinyserve/tinyserve/openai"
)

func TestOpenDefaultIsBuiltinCPU(t *testing.T) {
	e, err := Open(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	info := e.Info()
	if info.ID != DefaultModel || info.Backend != BackendCPU || !info.RandomWeights || info.VocabSize != 50257 {
		t.Errorf("info %+v", info)
	}
	ids := e.Tokenizer().Encode("Hello world", false)
	ch, err := e.Generate(context.Background(), llm.Request{PromptTokens: ids, Params: llm.SamplingParams{MaxTokens: 4, IgnoreEOS: true}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ev := range ch {
		n += len(ev.TokenIDs)
	}
	if n != 4 {
		t.Errorf("%d tokens, want 4", n)
	}

	// The wrapper that Open puts around the CPU backend passes on its
	// prompt log-probabilities (echo with logprobs in the server).
	zero := 0
	ch, err = e.Generate(context.Background(), llm.Request{PromptTokens: ids, Params: llm.SamplingParams{MaxTokens: 1, PromptLogprobs: &zero}})
	if err != nil {
		t.Fatalf("prompt logprobs on the built-in model: %v", err)
	}
	for ev := range ch {
		if ev.CompletionTokens == 1 && len(ev.PromptLogprobs) != len(ids)-1 {
			t.Errorf("%d prompt logprobs for %d prompt tokens", len(ev.PromptLogprobs), len(ids))
		}
	}
}

func TestOpenBFloat16Weights(t *testing.T) {
	e, err := Open(context.Background(), Config{DType: "bfloat16"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ch, err := e.Generate(context.Background(), llm.Request{PromptTokens: []int{464, 3290}, Params: llm.SamplingParams{MaxTokens: 3, IgnoreEOS: true}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ev := range ch {
		n += len(ev.TokenIDs)
	}
	if n != 3 {
		t.Errorf("%d tokens, want 3", n)
	}
}

// TestEngineSeed: with Config.Seed, requests without a seed of their own
// sample the same tokens in every engine given that seed (seed 0 too, as
// vLLM's --seed 0); another seed, or none, samples others. The sweep's
// JSON key "seed" reaches the setting, 0 included.
func TestEngineSeed(t *testing.T) {
	sample := func(seed *uint64) []int {
		t.Helper()
		e, err := Open(context.Background(), Config{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		var ids []int
		for range 2 { // the second request's seed is the sequence's second
			ch, err := e.Generate(context.Background(), llm.Request{PromptTokens: []int{464, 3290}, Params: llm.SamplingParams{MaxTokens: 8, Temperature: 1, IgnoreEOS: true}})
			if err != nil {
				t.Fatal(err)
			}
			for ev := range ch {
				ids = append(ids, ev.TokenIDs...)
			}
		}
		return ids
	}
	zero := sample(new(uint64(0)))
	if again := sample(new(uint64(0))); !slices.Equal(zero, again) {
		t.Errorf("seed 0 sampled %v, then %v", zero, again)
	}
	if one := sample(new(uint64(1))); slices.Equal(zero, one) {
		t.Errorf("seeds 0 and 1 sampled the same %v", one)
	}
	if clock := sample(nil); slices.Equal(zero, clock) {
		t.Errorf("no seed sampled seed 0's %v", clock)
	}
	for in, want := range map[string]*uint64{`{"seed": 0}`: new(uint64(0)), `{"seed": 7}`: new(uint64(7)), `{"seed": null}`: nil, `{}`: nil} {
		c, err := DecodeConfigJSON([]byte(in))
		if err != nil || (c.Seed == nil) != (want == nil) || (want != nil && *c.Seed != *want) {
			t.Errorf("%s: seed %v, %v", in, c.Seed, err)
		}
	}
}

func TestOpenOptions(t *testing.T) {
	e, err := Open(context.Background(), Config{Backend: BackendMock, ServedModelName: "my-model", MaxModelLen: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if info := e.Info(); info.ID != "my-model" || info.Root != "mock" || info.MaxModelLen != 100 || info.Backend != "mock" {
		t.Errorf("info %+v; want ID my-model, Root mock (the model's own id)", info)
	}
	// /v1/models lists the served name, with the model's own id as root.
	rec := httptest.NewRecorder()
	openai.NewHandler(e).ServeHTTP(rec, httptest.NewRequest("GET", "/v1/models", nil))
	var list struct {
		Data []struct{ ID, Root string }
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil || len(list.Data) != 1 || list.Data[0].ID != "my-model" || list.Data[0].Root != "mock" {
		t.Errorf("/v1/models: %s (%v)", rec.Body, err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	// A checkpoint folder whose tokenizer disagrees with its vocabulary.
	ckpt := filepath.Join(dir, "ckpt")
	src := "testdata/gpt2-tiny"
	if err := os.MkdirAll(ckpt, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "model.safetensors"} {
		data, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ckpt, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The same checkpoint with a slow tokenizer's files: they are read, and
	// their 3 tokens do not fit the model (not GPT-2's built-in BPE).
	slow := filepath.Join(dir, "slow")
	if err := os.CopyFS(slow, os.DirFS(ckpt)); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"vocab.json": `{"a": 0, "b": 1, "ab": 2}`, "merges.txt": "#version: 0.2\na b\n"} {
		if err := os.WriteFile(filepath.Join(slow, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{Model: slow}, "tokenizer has 3 tokens but the model's config.json says vocab_size 50257"},
		{Config{Backend: "tpu"}, "unknown backend"},
		{Config{DType: "int4"}, "dtype"},
		{Config{Backend: BackendCUDA}, "backend cuda"}, // no GPU in CI: a clear error, not a panic
		{Config{Backend: BackendCUDA, DType: "int8"}, "dtype"},
		{Config{Model: filepath.Join(dir, "missing")}, "missing"},
		{Config{MaxModelLen: 5000}, "max_model_len"},
		{Config{Model: ckpt, Tokenizer: testfiles.QwenTokenizer(t, ".")}, "vocab_size"},
		{Config{MaxNumSeqs: -1}, "MaxNumSeqs"},
		// Negative sizes are mistakes, as the flags' check says, not
		// the defaults that 0 means (the sweep's JSON reaches Open unchecked).
		{Config{MaxModelLen: -1}, "max_model_len must not be negative"},
		{Config{NumBlocks: -1}, "NumBlocks must not be negative"},
		// The mock refuses what it would not honour rather than ignore it.
		{Config{Backend: BackendMock, Model: DefaultModel}, "only the mock model"},
		{Config{Backend: BackendMock, Tokenizer: "gpt2"}, "tokenizer"},
		{Config{Backend: BackendMock, DType: "bfloat16"}, "dtype"},
		{Config{Backend: BackendMock, KVCacheBytes: 1 << 20}, "kv_cache_bytes"},
		{Config{Backend: BackendMock, Threads: 2}, "threads"},
		// So do the other backends.
		{Config{GPUMemoryUtilization: 0.5}, "gpu_memory_utilization (--gpu-memory-utilization) 0.5 does not apply to the cpu backend"},
		{Config{Backend: BackendCUDA, Threads: 4}, "threads (--threads) 4 does not apply to the cuda backend (only to cpu)"},
		{Config{Backend: BackendCUDA, KVCacheBytes: 1 << 20}, "kv_cache_bytes"},
		{Config{MockLatency: mock.Latency{PerStep: time.Millisecond}}, "mock latency"},
	}
	for _, c := range cases {
		e, err := Open(context.Background(), c.cfg)
		if err == nil {
			e.Close()
			t.Errorf("%+v: no error", c.cfg)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %q does not mention %q", c.cfg, err, c.want)
		}
	}
	// --enforce-eager is what the cpu and mock backends always do: they
	// accept it, as vLLM does on every device.
	for _, b := range []string{BackendCPU, BackendMock} {
		if e, err := Open(context.Background(), Config{Backend: b, EnforceEager: true}); err != nil {
			t.Errorf("%s, enforce_eager: %v", b, err)
		} else {
			e.Close()
		}
	}
	// vLLM's --dtype float is float32: the cpu backend opens with it, and
	// the cuda backend gets past the dtype check (failing only for want of
	// a GPU here).
	if e, err := Open(context.Background(), Config{DType: "float"}); err != nil {
		t.Errorf("dtype float: %v", err)
	} else {
		e.Close()
	}
	if e, err := Open(context.Background(), Config{Backend: BackendCUDA, DType: "float"}); err == nil {
		e.Close()
	} else if strings.Contains(err.Error(), "dtype") {
		t.Errorf("cuda, dtype float: %v", err)
	}
	// A folder without tokenizer files gets GPT-2's built-in BPE; when its
	// vocabulary does not fit, the error says where the tokenizer came from
	// (a vocab.json lost from a slow tokenizer's pair looks like this).
	small := model.GPT2Config(261, 16, 8, 1, 2)
	small.BOSTokenID, small.EOSTokenIDs = 260, []int{260}
	sm, err := model.NewRandom("small", small, model.RandomOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	smallDir := filepath.Join(dir, "small")
	if err := sm.WriteCheckpoint(smallDir, ""); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(smallDir, "merges.txt"), []byte("#version: 0.2\na b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if e, err := Open(context.Background(), Config{Model: smallDir}); err == nil {
		e.Close()
		t.Error("a 261-token model opened with GPT-2's built-in BPE")
	} else if want := "vocab_size 261; the tokenizer is GPT-2's built-in BPE (the model folder has no tokenizer.json, nor vocab.json with merges.txt)"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not mention %q", err, want)
	}
	// The mock takes its own model's name and the default dtype.
	for _, cfg := range []Config{{Backend: BackendMock, Model: "mock", DType: "auto"}, {Backend: BackendMock}} {
		e, err := Open(context.Background(), cfg)
		if err != nil {
			t.Fatalf("%+v: %v", cfg, err)
		}
		e.Close()
	}
	// The same folder with its own, correct tokenizer choice opens.
	e, err := Open(context.Background(), Config{Model: ckpt})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Info().ID; got != "ckpt" {
		t.Errorf("checkpoint id %q", got)
	}
	e.Close()
}

func TestDecodeConfigJSON(t *testing.T) {
	c, err := DecodeConfigJSON([]byte(`{"backend":"cpu","model":"tiny-gpt2","max_num_seqs":4,"max_num_batched_tokens":64,"block_size":16,"num_blocks":256}`))
	if err != nil || c.MaxNumSeqs != 4 || c.NumBlocks != 256 || c.MaxNumBatchedTokens != 64 {
		t.Fatalf("%+v %v", c, err)
	}
	if _, err := DecodeConfigJSON([]byte(`{"max_num_seq":4}`)); err == nil || !strings.Contains(err.Error(), "max_num_seq") {
		t.Errorf("unknown key: %v", err)
	}
}

// TestPrefixCachingSettings: the sweep's JSON key reaches
// Config.EnablePrefixCaching, which is off by default (the flag and its
// environment variable: internal/cli's TestPrefixCachingFlags).
func TestPrefixCachingSettings(t *testing.T) {
	if (Config{}).EnablePrefixCaching {
		t.Error("prefix caching on by default")
	}
	c, err := DecodeConfigJSON([]byte(`{"enable_prefix_caching":true}`))
	if err != nil || !c.EnablePrefixCaching {
		t.Errorf("enable_prefix_caching: %+v %v", c, err)
	}
}

// TestOpenFromHubCache: a Hugging Face id found in the local hub cache is
// served under that id, with the snapshot's own tokenizer files; a
// snapshot without weights (only the tokenizer was fetched) is skipped;
// nothing found lists where it looked.
func TestOpenFromHubCache(t *testing.T) {
	hub := t.TempDir()
	repo := filepath.Join(hub, "models--openai-community--gpt2")
	blobs := filepath.Join(repo, "blobs")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		t.Fatal(err)
	}
	// As huggingface_hub lays it out: snapshot files are links to blobs.
	link := func(snap, name, src string) {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		blob := filepath.Join(blobs, snap+"-"+name)
		if err := os.WriteFile(blob, data, 0o644); err != nil {
			t.Fatal(err)
		}
		d := filepath.Join(repo, "snapshots", snap)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..", "..", "blobs", snap+"-"+name), filepath.Join(d, name)); err != nil {
			t.Fatal(err)
		}
	}
	link("aaa", "tokenizer_config.json", "testdata/gpt2-tiny/config.json") // a snapshot with no weights
	link("bbb", "config.json", "testdata/gpt2-tiny/config.json")
	link("bbb", "model.safetensors", "testdata/gpt2-tiny/model.safetensors")
	env := func(k string) string {
		if k == "HF_HUB_CACHE" {
			return hub
		}
		return ""
	}
	for _, id := range []string{"openai-community/gpt2", "gpt2"} { // gpt2 is the same repository's old id
		var logs syncbuf.Buffer
		e, err := Open(context.Background(), Config{Model: id, Getenv: env, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if got := e.Info().ID; got != id {
			t.Errorf("served as %q, want %q", got, id)
		}
		if want := filepath.Join(repo, "snapshots", "bbb"); !strings.Contains(logs.String(), want) {
			t.Errorf("the log does not say which snapshot was loaded (%s):\n%s", want, logs.String())
		}
		e.Close()
	}
	_, err := Open(context.Background(), Config{Model: "openai-community/gpt2-medium", Getenv: env})
	if err == nil {
		t.Fatal("a model missing from the cache was opened")
	}
	for _, want := range []string{"nothing is downloaded", filepath.Join(hub, "models--openai-community--gpt2-medium", "snapshots", "*"), "hf download openai-community/gpt2-medium config.json model.safetensors tokenizer.json"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// TestOpenHubRevision: --revision picks a snapshot of the hub cache by
// branch, tag or commit hash, and Info().Source records which; a revision
// the cache lacks lists those it holds; a folder, a built-in model and the
// mock refuse a revision; --tokenizer-revision loads the model id's
// tokenizer at that revision.
func TestOpenHubRevision(t *testing.T) {
	const c1, c2 = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	hub := t.TempDir()
	repo := filepath.Join(hub, "models--openai-community--gpt2")
	put := func(rel string, data []byte) {
		p := filepath.Join(repo, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []string{c1, c2} {
		for _, f := range []string{"config.json", "model.safetensors"} {
			data, err := os.ReadFile(filepath.Join("testdata/gpt2-tiny", f))
			if err != nil {
				t.Fatal(err)
			}
			put("snapshots/"+c+"/"+f, data)
		}
	}
	put("snapshots/"+c2+"/generation_config.json", []byte(`{"temperature": 0.5}`))
	// A tokenizer of 3 tokens, which the model refuses: its error shows
	// that this revision's tokenizer was the one loaded.
	put("snapshots/"+c2+"/vocab.json", []byte(`{"a": 0, "b": 1, "ab": 2}`))
	put("snapshots/"+c2+"/merges.txt", []byte("#version: 0.2\na b\n"))
	put("refs/main", []byte(c1))
	put("refs/v2", []byte(c2))
	env := func(k string) string {
		if k == "HF_HUB_CACHE" {
			return hub
		}
		return ""
	}
	open := func(cfg Config) (llm.ModelInfo, error) {
		t.Helper()
		cfg.Getenv = env
		e, err := Open(context.Background(), cfg)
		if err != nil {
			return llm.ModelInfo{}, err
		}
		defer e.Close()
		return e.Info(), nil
	}
	for _, c := range []struct {
		revision, commit string
		temperature      bool
	}{{"", c1, false}, {"main", c1, false}, {c1, c1, false}, {"v2", c2, true}, {c2, c2, true}} {
		// The model's own tokenizer files are not used here: c2's would be
		// refused (see below).
		info, err := open(Config{Model: "openai-community/gpt2", Revision: c.revision, Tokenizer: "gpt2"})
		if err != nil {
			t.Fatalf("revision %q: %v", c.revision, err)
		}
		src := info.Source
		if src == nil || src.Revision != c.commit || src.HubID != "openai-community/gpt2" || src.Dir != filepath.Join(repo, "snapshots", c.commit) {
			t.Errorf("revision %q: source %+v, want commit %s of openai-community/gpt2", c.revision, src, c.commit)
			continue
		}
		wantFiles := []string{"config.json", "model.safetensors"}
		if c.temperature {
			wantFiles = []string{"config.json", "generation_config.json", "model.safetensors"}
		}
		if !slices.Equal(src.Files, wantFiles) {
			t.Errorf("revision %q: files %q, want %q", c.revision, src.Files, wantFiles)
		}
		if got := info.Defaults.Temperature != nil; got != c.temperature {
			t.Errorf("revision %q: generation_config.json read: %v, want %v", c.revision, got, c.temperature)
		}
	}
	// The old id finds the same repository, and the source names it.
	if info, err := open(Config{Model: "gpt2", Revision: "v2", Tokenizer: "gpt2"}); err != nil || info.Source == nil || info.Source.HubID != "openai-community/gpt2" || info.ID != "gpt2" {
		t.Errorf("gpt2 at v2: %+v, %v", info.Source, err)
	}
	// Without --tokenizer, the snapshot's own tokenizer files are read.
	if _, err := open(Config{Model: "openai-community/gpt2", Revision: "v2"}); err == nil || !strings.Contains(err.Error(), "tokenizer has 3 tokens") {
		t.Errorf("v2 with its own tokenizer: %v, want the 3-token tokenizer refused", err)
	}
	// --tokenizer-revision without --tokenizer: the model id's tokenizer
	// at that revision, while the weights stay at main.
	_, err := open(Config{Model: "openai-community/gpt2", TokenizerRevision: "v2"})
	if err == nil || !strings.Contains(err.Error(), "tokenizer has 3 tokens") {
		t.Errorf("--tokenizer-revision v2: %v, want v2's 3-token tokenizer refused", err)
	}
	// --revision is the tokenizer's too when --tokenizer names another id
	// (vLLM's tokenizer_revision defaults to its revision), but not for
	// the built-in GPT-2 BPE's names.
	for _, f := range []string{"vocab.json", "merges.txt"} {
		data, err := os.ReadFile(filepath.Join(repo, "snapshots", c2, f))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(hub, "models--org--tok", "snapshots", c2, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(hub, "models--org--tok", "refs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hub, "models--org--tok", "refs", "v2"), []byte(c2), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := open(Config{Model: "openai-community/gpt2", Revision: "v2", Tokenizer: "org/tok"}); err == nil || !strings.Contains(err.Error(), "tokenizer has 3 tokens") {
		t.Errorf("--tokenizer org/tok --revision v2: %v, want org/tok's v2 (3 tokens) loaded and refused", err)
	}
	if _, err := open(Config{Model: "openai-community/gpt2", Revision: "main", Tokenizer: "org/tok"}); err == nil || !strings.Contains(err.Error(), "--revision main applies to --tokenizer org/tok too") {
		t.Errorf("--tokenizer org/tok --revision main: %v, want the inherited revision explained", err)
	}
	if _, err := open(Config{Model: "openai-community/gpt2", Revision: "v2", Tokenizer: "openai-community/gpt2"}); err != nil {
		t.Errorf("--tokenizer openai-community/gpt2 --revision v2: %v, want the built-in BPE", err)
	}
	if info, err := open(Config{Model: "openai-community/gpt2", Revision: "v2", Tokenizer: "openai-community/gpt2", TokenizerRevision: c1}); err == nil {
		t.Errorf("a tokenizer at %s, which has no tokenizer files, was found: %+v", c1, info.Source)
	} else if !strings.Contains(err.Error(), "at revision") {
		t.Errorf("tokenizer at a revision without one: %v", err)
	}

	for _, c := range []struct {
		cfg  Config
		want []string
	}{
		{Config{Model: "openai-community/gpt2", Revision: "dev"}, []string{`at revision "dev"`, "main -> " + c1, "v2 -> " + c2, "hf download openai-community/gpt2 --revision dev"}},
		{Config{Model: "openai-community/gpt2", Revision: c1[:7]}, []string{"in full"}},
		{Config{Model: "testdata/gpt2-tiny", Revision: "main"}, []string{"is a folder"}},
		{Config{Model: "tiny-gpt2", Revision: "main"}, []string{"built in"}},
		{Config{Backend: BackendMock, Revision: "main"}, []string{"revision (--revision)"}},
		{Config{Model: "testdata/gpt2-tiny", TokenizerRevision: "main"}, []string{"give --tokenizer"}},
		{Config{TokenizerRevision: "main"}, []string{`the model "tiny-gpt2" is not one`}}, // the default model, named
		{Config{Model: "testdata/gpt2-tiny", Tokenizer: "testdata/gpt2-tiny", TokenizerRevision: "main"}, []string{"applies to a tokenizer named by its Hugging Face id"}},
	} {
		_, err := open(c.cfg)
		if err == nil {
			t.Errorf("%+v: opened", c.cfg)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: error %q does not mention %q", c.cfg, err, w)
			}
		}
	}
}

// TestLoadFormatDummy: --load-format dummy serves a hub snapshot that
// holds only config.json, with random weights labelled as such; a
// built-in model takes dummy (it is random already) but not a file
// format; the mock refuses the setting.
func TestLoadFormatDummy(t *testing.T) {
	hub := t.TempDir()
	snap := filepath.Join(hub, "models--org--big", "snapshots", "c1")
	if err := os.MkdirAll(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("testdata/gpt2-tiny/config.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(snap, "config.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	env := func(k string) string {
		if k == "HF_HUB_CACHE" {
			return hub
		}
		return ""
	}
	if _, err := Open(context.Background(), Config{Model: "org/big", Getenv: env}); err == nil {
		t.Fatal("a snapshot without weights opened with load format auto")
	}
	e, err := Open(context.Background(), Config{Model: "org/big", LoadFormat: "dummy", Getenv: env})
	if err != nil {
		t.Fatal(err)
	}
	info := e.Info()
	e.Close()
	if !info.RandomWeights || info.Source == nil || !slices.Equal(info.Source.Files, []string{"config.json"}) || info.Source.Revision != "c1" {
		t.Errorf("dummy: random %v, source %+v", info.RandomWeights, info.Source)
	}
	if e, err := Open(context.Background(), Config{LoadFormat: "dummy"}); err != nil {
		t.Errorf("built-in with dummy: %v", err)
	} else {
		e.Close()
	}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{LoadFormat: "pt"}, "is built in"},
		{Config{Backend: BackendMock, LoadFormat: "dummy"}, "load_format (--load-format)"},
		{Config{Model: "testdata/gpt2-tiny", LoadFormat: "npcache"}, `load format "npcache"`},
	} {
		if _, err := Open(context.Background(), c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}

// TestOpenVocabWithoutMerges: a checkpoint folder with a vocab.json but no
// merges.txt (and no tokenizer.json) has no tokenizer of its own, so it
// gets GPT-2's built-in BPE, as docs/gpt2.md says, rather than a "no
// tokenizer found" error.
func TestOpenVocabWithoutMerges(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/gpt2-tiny")); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "tokenizer.json"))
	if err := os.WriteFile(filepath.Join(dir, "vocab.json"), []byte(`{"a": 0}`), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := Open(context.Background(), Config{Model: dir})
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
}

// TestOpenFolderNamedGPT2: a checkpoint folder whose relative path is also
// the built-in tokenizer's name (gpt2, openai-community/gpt2: what
// `hf download gpt2 --local-dir gpt2` makes) is read with its own
// tokenizer files, not GPT-2's built-in BPE: here a slow tokenizer of 3
// tokens, which the model's vocabulary refuses.
func TestOpenFolderNamedGPT2(t *testing.T) {
	wd := t.TempDir()
	for _, name := range []string{"gpt2", filepath.Join("openai-community", "gpt2")} {
		dir := filepath.Join(wd, name)
		if err := os.CopyFS(dir, os.DirFS("testdata/gpt2-tiny")); err != nil {
			t.Fatal(err)
		}
		for f, body := range map[string]string{"vocab.json": `{"a": 0, "b": 1, "ab": 2}`, "merges.txt": "#version: 0.2\na b\n"} {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Chdir(wd)
	for _, model := range []string{"gpt2", "openai-community/gpt2"} {
		e, err := Open(context.Background(), Config{Model: model, Getenv: func(string) string { return "" }})
		if err == nil {
			e.Close()
			t.Errorf("%s: opened with GPT-2's built-in tokenizer, not the folder's", model)
			continue
		}
		if want := "tokenizer has 3 tokens"; !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %q does not mention %q", model, err, want)
		}
	}
}

// TestGenerationConfig: a checkpoint's generation_config.json gives the
// engine's sampling defaults (auto), vllm drops them, and a folder's file
// replaces them; the mock refuses the setting. max_new_tokens is what
// max_tokens null means in auto mode, and a folder's is also a limit on
// every request (vLLM's override_max_tokens).
func TestGenerationConfig(t *testing.T) {
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "ckpt")
	if err := os.CopyFS(ckpt, os.DirFS("testdata/gpt2-tiny")); err != nil {
		t.Fatal(err)
	}
	write := func(folder, body string) {
		if err := os.MkdirAll(folder, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(folder, "generation_config.json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(ckpt, `{"do_sample": true, "temperature": 0.7, "top_k": 40, "max_new_tokens": 30}`)
	other := filepath.Join(dir, "other")
	write(other, `{"top_p": 0.9, "max_new_tokens": 12}`)
	for _, c := range []struct{ setting, want string }{
		{"", "temperature=0.7 top_k=40 max_tokens=30"},
		{"auto", "temperature=0.7 top_k=40 max_tokens=30"},
		{"vllm", ""},
		{other, "top_p=0.9 max_tokens=12 max_tokens_limit=12"},
	} {
		e, err := Open(context.Background(), Config{Model: ckpt, GenerationConfig: c.setting})
		if err != nil {
			t.Fatalf("%q: %v", c.setting, err)
		}
		if got := e.Info().Defaults.String(); got != c.want {
			t.Errorf("generation_config %q: defaults %q, want %q", c.setting, got, c.want)
		}
		e.Close()
	}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Model: ckpt, GenerationConfig: filepath.Join(dir, "none")}, "want auto, vllm or a folder holding generation_config.json"},
		{Config{Backend: BackendMock, GenerationConfig: "vllm"}, "generation_config (--generation-config) vllm does not apply to the mock backend"},
	} {
		e, err := Open(context.Background(), c.cfg)
		if err == nil {
			e.Close()
			t.Fatalf("%+v: no error", c.cfg)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %q does not mention %q", err, c.want)
		}
	}
}

// TestPaddedVocabulary: a checkpoint whose vocabulary is padded past its
// tokenizer's (nanoGPT pads GPT-2's 50257 to 50304) is served with the
// padding dropped: it opens, reports the tokenizer's size, and never
// produces a padded id even where the padded rows would win every argmax.
func TestPaddedVocabulary(t *testing.T) {
	greedy := func(e llm.Engine) []int {
		t.Helper()
		ch, err := e.Generate(context.Background(), llm.Request{PromptTokens: []int{464, 3290}, Params: llm.SamplingParams{MaxTokens: 6, IgnoreEOS: true}})
		require.NoError(t, err)
		var ids []int
		for ev := range ch {
			require.NoError(t, ev.Err)
			ids = append(ids, ev.TokenIDs...)
		}
		return ids
	}
	base, err := Open(context.Background(), Config{})
	require.NoError(t, err)
	want := greedy(base)
	base.Close()

	m, err := model.Builtin(model.BuiltinTiny)
	require.NoError(t, err)
	c := m.Config.Hidden
	// 47 padded rows, each 10 times the row of the first token greedy
	// picks: untrimmed, a padded id would beat it.
	wte := slices.Clone(m.Weights.Embed.Float32s())
	row := wte[want[0]*c : (want[0]+1)*c]
	for range 47 {
		for _, v := range row {
			wte = append(wte, 10*v)
		}
	}
	padded := &model.Model{Name: "padded", Config: m.Config, Weights: m.Weights}
	padded.Config.VocabSize = 50304
	padded.Weights.Embed = tensor.FromFloat32(wte, 50304, int64(c))
	padded.Weights.LMHead = padded.Weights.Embed
	dir := t.TempDir()
	require.NoError(t, padded.WriteCheckpoint(dir, ""))

	e, err := Open(context.Background(), Config{Model: dir})
	require.NoError(t, err)
	defer e.Close()
	assert.Equal(t, 50257, e.Info().VocabSize, "the tokenizer's size")
	assert.Equal(t, want, greedy(e), "the same tokens as without the padding")
}

// TestServedNameReplacesFolderPath: a checkpoint folder is also asked for
// by its path (as vLLM serves it), unless a served name is given, even one
// equal to the folder's name: vLLM then answers only to that name.
func TestServedNameReplacesFolderPath(t *testing.T) {
	const path = "testdata/gpt2-tiny"
	ask := func(cfg Config, model string) int {
		t.Helper()
		cfg.Model = path
		e, err := Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		rec := httptest.NewRecorder()
		body := `{"model":"` + model + `","prompt":"hi","max_tokens":1}`
		openai.NewHandler(e).ServeHTTP(rec, httptest.NewRequest("POST", "/v1/completions", strings.NewReader(body)))
		return rec.Code
	}
	if code := ask(Config{}, path); code != 200 {
		t.Errorf("no served name: the path got %d, want 200", code)
	}
	for _, name := range []string{"gpt2-tiny", "other"} {
		if code := ask(Config{ServedModelName: name}, path); code != 404 {
			t.Errorf("--served-model-name %s: the path got %d, want 404", name, code)
		}
		if code := ask(Config{ServedModelName: name}, name); code != 200 {
			t.Errorf("--served-model-name %s: the name got %d, want 200", name, code)
		}
	}
}
