package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	tcli "github.com/tinyserve/tinyserve/internal/cli"
	"github.com/tinyserve/tinyserve/llm/cuda"
	"github.com/tinyserve/tinyserve/llm/model"
	"github.com/tinyserve/tinyserve/sweep"
	"github.com/tinyserve/tinyserve/sweep/analysis"
	"github.com/tinyserve/tinyserve/sweep/loadgen"
	"github.com/tinyserve/tinyserve/sweep/report"
)

func writePrompts(t *testing.T, dir string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"bucket":"short","id":"p_%06d","prompt":"hello number %d","prompt_tokens":4,"target_output_tokens":4,"target_prompt_tokens":4,"workload":"w"}`+"\n", i, i)
	}
	p := filepath.Join(dir, "p.jsonl")
	require.NoError(t, os.WriteFile(p, []byte(b.String()), 0o644))
	return p
}

func embeddedConfig(t *testing.T, dir string) string {
	cfg := map[string]any{
		"name":           "embedded-mock",
		"prompts":        writePrompts(t, dir, 4),
		"model_metadata": map[string]any{"revision": nil, "dtype": nil, "quantization": nil, "max_model_len": nil},
		"num_requests":   4,
		"concurrency":    []int{1, 2},
		"warmups":        0,
		"repeats":        1,
		"seed":           1,
		"ignore_eos":     true,
		"output_dir":     filepath.Join(dir, "results"),
		"target":         map[string]any{"kind": "embedded", "engine": map[string]any{"backend": "mock", "max_num_seqs": 2}},
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	p := filepath.Join(dir, "sweep.json")
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

func runApp(args ...string) (string, string, error) {
	var out, errb bytes.Buffer
	err := run(context.Background(), newApp(&out, &errb, func(string) string { return "" }), append([]string{"sweep"}, args...))
	return out.String(), errb.String(), err
}

func TestEmbeddedSweepAndCompare(t *testing.T) {
	dir := t.TempDir()
	cfg := embeddedConfig(t, dir)
	out, errOut, err := runApp(cfg)
	require.NoError(t, err, errOut)
	root := filepath.Join(dir, "results", "embedded-mock")
	assert.Contains(t, out, "report:  "+filepath.Join(root, "report.md"))
	assert.Contains(t, errOut, "embedded target serving mock")
	for _, f := range []string{"summary.json", "report.md", "summary.csv", "plot.png", "plot.svg", "manifest.json", "models.json", "repeat-01/concurrency-002.jsonl"} {
		assert.FileExists(t, filepath.Join(root, f))
	}
	rows, err := os.ReadFile(filepath.Join(root, "repeat-01", "concurrency-001.jsonl"))
	require.NoError(t, err)
	assert.Contains(t, string(rows), `"output_tokens":4`)

	first := out
	out, errOut, err = runApp(cfg)
	require.NoError(t, err)
	assert.Contains(t, out, "already complete")
	// The verdict is repeated, the same as the sweep's own.
	verdict := regexp.MustCompile(`candidate saturation concurrency: .*\n`)
	require.Regexp(t, verdict, first)
	assert.Equal(t, verdict.FindString(first), verdict.FindString(out))
	assert.NotContains(t, errOut, "starting embedded", "a complete sweep never starts the engine")

	// A different backend is a different sweep: refused in the same folder.
	_, _, err = runApp("--engine", "max_num_seqs=1", cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "config differs")

	_, errOut, err = runApp(cfg, "--engine", "max_num_seqs=1", "--output-root", filepath.Join(dir, "other")) // flags after CONFIG work too
	require.NoError(t, err, errOut)

	out, _, err = runApp("compare", root, filepath.Join(dir, "other", "embedded-mock"))
	require.NoError(t, err)
	assert.Contains(t, out, "B/A")
	assert.Contains(t, out, "saturation candidate:")
	assert.NotContains(t, out, "warning:", "same workload and settings: comparable")
}

// TestEmbeddedCheckpointRecorded: an embedded target serving a checkpoint
// folder records its files' SHA-256 in manifest.json (checked here against
// the files themselves): the model's, then the tokenizer's; the mock, made
// in memory, records none.
func TestEmbeddedCheckpointRecorded(t *testing.T) {
	dir := t.TempDir()
	cfgPath := embeddedConfig(t, dir)
	// A small random GPT-2 with the tokenizer tests' 270-token tokenizer.
	ckpt := tinyCheckpoint(t, dir)
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "llm", "tokenizer", "testdata", "tiny", f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(ckpt, f), b, 0o644))
	}
	_, errOut, err := runApp(cfgPath, "--engine", "backend=cpu", "--engine", "model="+ckpt, "--engine", "max_num_seqs=2")
	require.NoError(t, err, errOut)
	var man sweep.Manifest
	b, err := os.ReadFile(filepath.Join(dir, "results", "embedded-mock", "manifest.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &man))
	ck := man.Serving.Checkpoint
	require.NotNil(t, ck, "no checkpoint in the manifest")
	assert.Equal(t, ckpt, ck.Dir)
	assert.Nil(t, ck.Tokenizer, "the tokenizer's files are the folder's")
	var names []string
	for _, f := range ck.Files {
		names = append(names, f.Name)
		want, err := loadgen.FileSHA256(filepath.Join(ckpt, f.Name))
		require.NoError(t, err)
		assert.Equal(t, want, f.SHA256, f.Name)
	}
	assert.Equal(t, []string{"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}, names)

	_, errOut, err = runApp(cfgPath, "--output-root", filepath.Join(dir, "mock"))
	require.NoError(t, err, errOut)
	b, err = os.ReadFile(filepath.Join(dir, "mock", "embedded-mock", "manifest.json"))
	require.NoError(t, err)
	assert.NotContains(t, string(b), `"checkpoint"`)
}

// tinyCheckpoint writes a small random GPT-2 folder matching the tokenizer
// tests' 270-token tokenizer (not copied in) and returns its path.
func tinyCheckpoint(t *testing.T, dir string) string {
	t.Helper()
	ckpt := filepath.Join(dir, "ckpt")
	c := model.GPT2Config(270, 64, 8, 1, 2)
	c.BOSTokenID, c.EOSTokenIDs = 269, []int{269}
	m, err := model.NewRandom("ckpt", c, model.RandomOptions{Seed: 7, Std: 0.5})
	require.NoError(t, err)
	require.NoError(t, m.WriteCheckpoint(ckpt, ""))
	return ckpt
}

// TestEmbeddedTokenizerFromMovedHubCache: a tokenizer read from a Hugging
// Face hub cache (--tokenizer org/tok) is recorded as "tokenizer/..." with
// the snapshot's id and commit, so that a resume after the cache moved
// (another HF_HUB_CACHE, the same bytes) is accepted; changed bytes are
// refused naming the file; and a manifest written before (the tokenizer's
// files by absolute path, in the cache's old place) accepts the same
// bytes.
func TestEmbeddedTokenizerFromMovedHubCache(t *testing.T) {
	dir := t.TempDir()
	cfgPath := embeddedConfig(t, dir)
	ckpt := tinyCheckpoint(t, dir)
	// As huggingface_hub lays it out: snapshot files are links to blobs.
	hub1 := filepath.Join(dir, "hub1")
	repo := filepath.Join(hub1, "models--org--tok")
	snap := filepath.Join(repo, "snapshots", "c0ffee")
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "blobs"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "refs"), 0o755))
	require.NoError(t, os.MkdirAll(snap, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(repo, "refs", "main"), []byte("c0ffee"), 0o644))
	tokNames := []string{"tokenizer.json", "tokenizer_config.json"}
	for _, f := range tokNames {
		b, err := os.ReadFile(filepath.Join("..", "..", "llm", "tokenizer", "testdata", "tiny", f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(repo, "blobs", f), b, 0o644))
		require.NoError(t, os.Symlink(filepath.Join("..", "..", "blobs", f), filepath.Join(snap, f)))
	}
	root := filepath.Join(dir, "results", "embedded-mock")
	sweepWith := func(hub string) error {
		t.Setenv("HF_HUB_CACHE", hub)
		_, errOut, err := runApp(cfgPath, "--engine", "backend=cpu", "--engine", "model="+ckpt, "--engine", "tokenizer=org/tok", "--engine", "max_num_seqs=2")
		if err != nil {
			return fmt.Errorf("%w\n%s", err, errOut)
		}
		return nil
	}
	undoLast := func() { // so that the next invocation resumes
		last := sweep.Order(1, []int{1, 2}, 0, 1)[1]
		require.NoError(t, os.Remove(last.RawPath(root)))
		require.NoError(t, os.Remove(last.SummaryPath(root)))
		require.NoError(t, os.Remove(filepath.Join(root, "summary.json")))
	}
	readManifest := func() sweep.Manifest {
		var man sweep.Manifest
		b, err := os.ReadFile(filepath.Join(root, "manifest.json"))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &man))
		return man
	}

	require.NoError(t, sweepWith(hub1))
	ck := readManifest().Serving.Checkpoint
	require.NotNil(t, ck, "no checkpoint in the manifest")
	assert.Equal(t, ckpt, ck.Dir)
	assert.Equal(t, &analysis.CheckpointOrigin{Dir: snap, HubID: "org/tok", Revision: "c0ffee"}, ck.Tokenizer)
	var names []string
	for _, f := range ck.Files {
		names = append(names, f.Name)
		p := filepath.Join(ckpt, f.Name)
		if n, ok := strings.CutPrefix(f.Name, "tokenizer/"); ok {
			p = filepath.Join(snap, n)
		}
		want, err := loadgen.FileSHA256(p)
		require.NoError(t, err)
		assert.Equal(t, want, f.SHA256, f.Name)
	}
	assert.Equal(t, []string{"config.json", "model.safetensors", "tokenizer/tokenizer.json", "tokenizer/tokenizer_config.json"}, names)
	report, err := os.ReadFile(filepath.Join(root, "report.md"))
	require.NoError(t, err)
	assert.Contains(t, string(report), "Model files (the embedded target's): `"+ckpt+"`, the `tokenizer/` files from `org/tok` at commit `c0ffee` (")

	// The cache moves (another HF_HOME, another machine): the same bytes.
	undoLast()
	hub2 := filepath.Join(dir, "hub2")
	require.NoError(t, os.Rename(hub1, hub2))
	require.NoError(t, sweepWith(hub2), "the same tokenizer files in a moved cache")
	man := readManifest()
	require.Len(t, man.Resumes, 1)
	assert.Equal(t, filepath.Join(hub2, "models--org--tok", "snapshots", "c0ffee"), man.Resumes[0].Checkpoint.Tokenizer.Dir)

	// Changed bytes are refused, naming the file.
	undoLast()
	config := filepath.Join(hub2, "models--org--tok", "blobs", "tokenizer_config.json")
	orig, err := os.ReadFile(config)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(config, append(slices.Clone(orig), '\n'), 0o644))
	err = sweepWith(hub2)
	require.ErrorIs(t, err, sweep.ErrRefused)
	assert.Contains(t, err.Error(), "tokenizer/tokenizer_config.json has SHA-256 ")
	assert.NotContains(t, err.Error(), " is new")
	require.NoError(t, os.WriteFile(config, orig, 0o644))

	// A manifest written before tokenizer files were named so: absolute
	// paths into the cache's old place, no "tokenizer" folder recorded.
	var raw map[string]any
	b, err := os.ReadFile(filepath.Join(root, "manifest.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &raw))
	old := raw["serving"].(map[string]any)["checkpoint"].(map[string]any)
	delete(old, "tokenizer")
	for _, f := range old["files"].([]any) {
		f := f.(map[string]any)
		if n, ok := strings.CutPrefix(f["name"].(string), "tokenizer/"); ok {
			f["name"] = filepath.Join(snap, n) // in hub1, which is gone
		}
	}
	b, err = json.MarshalIndent(raw, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "manifest.json"), b, 0o644))
	require.NoError(t, sweepWith(hub2), "an old record of the same bytes")
	assert.Equal(t, filepath.Join(snap, "tokenizer.json"), readManifest().Serving.Checkpoint.Files[2].Name, "the old record stays as written")
}

func TestSweepArgs(t *testing.T) {
	out, _, err := runApp()
	assert.ErrorContains(t, err, "want a CONFIG argument")
	assert.Contains(t, out, "USAGE", "no argument: the usage is printed")
	_, _, err = runApp("a.json", "b.json")
	assert.ErrorContains(t, err, "want one CONFIG")
	_, _, err = runApp("compare", "a")
	assert.ErrorContains(t, err, "two sweeps")
	empty := filepath.Join(t.TempDir(), "empty.json")
	require.NoError(t, os.WriteFile(empty, []byte(`{}`), 0o644))
	out, _, err = runApp("compare", empty, empty)
	assert.ErrorContains(t, err, "not a sweep summary.json")
	assert.Empty(t, out, "nothing that looks like a comparison")
	_, _, err = runApp("/nonexistent/config.json")
	assert.Error(t, err)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"name":"x"}`), 0o644))
	_, _, err = runApp(bad)
	assert.ErrorContains(t, err, "prompts: required")
}

// TestHelpAfterConfig: help asked for after CONFIG is help, and a value
// flag at the end is named as missing its value.
func TestHelpAfterConfig(t *testing.T) {
	for _, h := range []string{"--help", "-h"} {
		out, _, err := runApp("c.json", h, "--output-root", "/x")
		assert.NoError(t, err, h)
		assert.Contains(t, out, "USAGE", h)
	}
	_, _, err := runApp("c.json", "--output-root")
	assert.ErrorContains(t, err, "flag needs an argument")
}

func TestFlagsFirst(t *testing.T) {
	app := newApp(io.Discard, io.Discard, func(string) string { return "" })
	for _, tc := range []struct{ in, want []string }{
		{[]string{"sweep", "c.json"}, []string{"sweep", "c.json"}},
		{[]string{"sweep", "c.json", "--output-root", "/tmp/x"}, []string{"sweep", "--output-root", "/tmp/x", "c.json"}},
		{[]string{"sweep", "c.json", "--verbose", "--engine=backend=mock"}, []string{"sweep", "--verbose", "--engine=backend=mock", "c.json"}},
		{[]string{"sweep", "--verbose", "c.json", "--engine", "backend=mock", "extra"}, []string{"sweep", "--verbose", "--engine", "backend=mock", "c.json", "extra"}},
		{[]string{"sweep", "c.json", "--", "--output-root"}, []string{"sweep", "c.json", "--", "--output-root"}},
		{[]string{"sweep", "compare", "a", "b"}, []string{"sweep", "compare", "a", "b"}},
		{[]string{"sweep", "--output-root=/x", "c.json", "--verbose"}, []string{"sweep", "--output-root=/x", "--verbose", "c.json"}},
		{[]string{"sweep", "c.json", "--output-root"}, []string{"sweep", "c.json", "--output-root"}},
		{[]string{"sweep", "c.json", "-h", "--output-root", "/x"}, []string{"sweep", "-h"}},
		{[]string{"sweep", "compare", "a", "--verbose", "b"}, []string{"sweep", "compare", "a", "--verbose", "b"}},
	} {
		got, err := tcli.Reorder(tc.in, app.Flags, app.Commands, "")
		assert.NoError(t, err)
		assert.Equal(t, tc.want, got, "%q", tc.in)
	}
}

// TestPrintSaturationWarnsOfNoise: the terminal summary names the levels
// whose repeats disagree, as the report does, and says nothing more when
// they agree.
func TestPrintSaturationWarnsOfNoise(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	level := func(c int, lo, med, hi float64) analysis.LevelAggregate {
		var a analysis.LevelAggregate
		a.Concurrency, a.Repeats = c, 3
		a.RepeatValues.OutputTokenThroughput = []*float64{f(lo), f(med), f(hi)}
		a.RepeatMedians.OutputTokenThroughput = f(med)
		return a
	}
	four := 4
	c := analysis.Combined{ByConcurrency: []analysis.LevelAggregate{level(1, 99, 100, 101), level(2, 150, 200, 210), level(4, 300, 400, 420)}}
	c.Saturation.Candidate = &four
	c.Saturation.ThroughputGainThreshold = analysis.DefaultThroughputGain
	var b bytes.Buffer
	report.WriteVerdict(&b, &c)
	assert.Equal(t, "candidate saturation concurrency: 4 (client-observed)\n"+
		"warning: repeats disagree at concurrency 2, 4 (up to 30% of the median apart, against the rule's 5% gain): the verdict may be noise; see the report\n", b.String())

	c.ByConcurrency = c.ByConcurrency[:1]
	c.Saturation.Candidate = nil
	b.Reset()
	report.WriteVerdict(&b, &c)
	assert.Equal(t, "candidate saturation concurrency: not demonstrated\n", b.String())
}

// TestNoGPUHint: an embedded cuda target that finds no driver or no device
// says how to run the sweep on the CPU (the committed scenario configs name
// cuda); other start-up errors get no such hint.
func TestNoGPUHint(t *testing.T) {
	notFound := fmt.Errorf("backend cuda: %w", &cuda.NotFoundError{Lib: cuda.Library{Name: "CUDA driver"}})
	noDevice := fmt.Errorf("backend cuda: %w", cuda.ErrNoDevice)
	for _, err := range []error{notFound, noDevice} {
		assert.Contains(t, noGPUHint(err), "--engine backend=cpu", err.Error())
	}
	assert.Empty(t, noGPUHint(errors.New(`dtype "int8" is not supported by the cuda backend`)))
}

// TestEngineOverridesKeepNumbers: --engine rewrites the config, and that
// rewrite must not pass the config's numbers through float64, which
// changed a seed above 2^53 (and so the sweep order) and let 0.0 stand
// for an integer that the config without --engine refuses.
func TestEngineOverridesKeepNumbers(t *testing.T) {
	dir := t.TempDir()
	write := func(warmups string) string {
		b, err := os.ReadFile(embeddedConfig(t, dir))
		require.NoError(t, err)
		var cfg map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(b, &cfg))
		cfg["seed"] = json.RawMessage("9007199254740993") // 2^53 + 1: no float64 holds it
		cfg["warmups"] = json.RawMessage(warmups)
		b, err = json.Marshal(cfg)
		require.NoError(t, err)
		p := filepath.Join(dir, "big-seed.json")
		require.NoError(t, os.WriteFile(p, b, 0o644))
		return p
	}
	cfg, err := sweep.LoadConfig(write("0"), "max_num_seqs=1", "num_blocks=64")
	require.NoError(t, err)
	assert.Equal(t, int64(9007199254740993), cfg.Seed)
	recorded, err := json.Marshal(cfg.Original())
	require.NoError(t, err)
	assert.Contains(t, string(recorded), `"seed":9007199254740993`, "config.json records the seed as written")
	assert.Contains(t, string(recorded), `"max_num_seqs":1`)

	_, errPlain := sweep.LoadConfig(write("0.0"))
	require.ErrorContains(t, errPlain, "warmups")
	_, err = sweep.LoadConfig(write("0.0"), "max_num_seqs=1")
	assert.ErrorContains(t, err, "warmups", "an override does not make 0.0 an integer")
}

// TestEmbeddedChatSweep runs experiments/example-chat.json, cut to two
// small runs: target.api "chat" makes the embedded server's endpoint
// /v1/chat/completions, every request goes through qwen3-tiny's chat
// template, and the evidence records the chat API.
func TestEmbeddedChatSweep(t *testing.T) {
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(repo, "experiments", "example-chat.json"))
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, json.Unmarshal(raw, &cfg))
	dir := t.TempDir()
	cfg["prompts"] = filepath.Join(repo, cfg["prompts"].(string))
	cfg["num_requests"], cfg["concurrency"], cfg["repeats"], cfg["warmups"] = 3, []int{1, 2}, 1, 0
	cfg["output_dir"] = dir
	target := cfg["target"].(map[string]any)
	require.Equal(t, "chat", target["api"])
	engine := target["engine"].(map[string]any)
	engine["model"] = filepath.Join(repo, engine["model"].(string))
	b, _ := json.Marshal(cfg)
	path := filepath.Join(dir, "chat.json")
	require.NoError(t, os.WriteFile(path, b, 0o644))

	_, errOut, err := runApp(path)
	require.NoError(t, err, errOut)
	assert.Regexp(t, `embedded target serving \S+ at http://127\.0\.0\.1:\d+/v1/chat/completions`, errOut)
	root := filepath.Join(dir, cfg["name"].(string))
	summary, err := os.ReadFile(filepath.Join(root, "summary.json"))
	require.NoError(t, err)
	assert.Contains(t, string(summary), `"api": "chat"`)
	rows, err := os.ReadFile(filepath.Join(root, "repeat-01", "concurrency-002.jsonl"))
	require.NoError(t, err)
	assert.Equal(t, 3, strings.Count(string(rows), `"status":200`), string(rows))
	assert.Equal(t, 3, strings.Count(string(rows), `"output_tokens":32`), "ignore_eos: every answer runs to the row's length")

	// A bad api is refused by name before anything starts.
	target["api"] = "responses"
	b, _ = json.Marshal(cfg)
	require.NoError(t, os.WriteFile(path, b, 0o644))
	_, _, err = runApp("--output-root", filepath.Join(dir, "bad"), path)
	require.ErrorContains(t, err, "target.api")
}
