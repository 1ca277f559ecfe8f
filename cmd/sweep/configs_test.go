package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve"
	"github.com/tinyserve/tinyserve/sweep"
	"github.com/tinyserve/tinyserve/sweep/loadgen"
)

// TestCommittedConfigs checks every sweep config in experiments/: it
// validates, its prompt file has enough rows, and an embedded target's
// engine settings decode, so a typo is caught here rather than minutes into
// a benchmark.
func TestCommittedConfigs(t *testing.T) {
	repo := filepath.Join("..", "..")
	paths, err := filepath.Glob(filepath.Join(repo, "experiments", "sweep-*.json"))
	require.NoError(t, err)
	require.Len(t, paths, 8, "tiny-vLLM's seven scenarios plus kv_pressure")
	si, err := filepath.Glob(filepath.Join(repo, "experiments", "si-qwen-*.json"))
	require.NoError(t, err)
	require.Len(t, si, 8, "serving-inference's four workloads on the built-in Qwen shape, each with a -cpu variant")
	paths = append(paths, si...)
	paths = append(paths, filepath.Join(repo, "experiments", "example.json"), filepath.Join(repo, "experiments", "example-vllm.json"),
		filepath.Join(repo, "experiments", "example-vllm-chat.json"), filepath.Join(repo, "experiments", "example-chat.json"))
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			cfg, err := sweep.LoadConfig(p)
			require.NoError(t, err)
			if strings.HasSuffix(p, "-chat.json") {
				assert.Equal(t, loadgen.APIChat, cfg.API(), "the chat examples speak chat")
			}
			rows, err := loadgen.ReadRows(filepath.Join(repo, cfg.Prompts), cfg.NumRequests)
			require.NoError(t, err)
			assert.Len(t, rows, cfg.NumRequests)
			if cfg.Embedded() {
				ec, err := tinyserve.DecodeConfigJSON(cfg.Target.Engine)
				require.NoError(t, err)
				assert.NotEmpty(t, ec.Backend)
				assert.True(t, cfg.IgnoreEOS)
				assert.Zero(t, cfg.Temperature, "greedy")
			}
		})
	}
}

// The vLLM example is serving-inference's config, unchanged.
func TestExampleVLLMIsServingInferences(t *testing.T) {
	ours, err := os.ReadFile(filepath.Join("..", "..", "experiments", "example-vllm.json"))
	require.NoError(t, err)
	theirs, err := os.ReadFile(filepath.Join("..", "..", "testdata", "serving-inference", "experiments", "example.json"))
	if err != nil {
		t.Skipf("fixture not available: %v", err)
	}
	assert.True(t, bytes.Equal(ours, theirs))
}

// TestServingInferenceConfigs: the si-qwen sweeps run serving-inference's
// own prompt files (made for Qwen2.5-0.5B-Instruct) on the built-in model of
// its shape, served under the Instruct model's name as serving-inference's
// requests name it; a -cpu variant differs from its full config only in
// being smaller (requests, levels, repeats) and on the cpu backend.
func TestServingInferenceConfigs(t *testing.T) {
	for _, w := range []string{"short", "long_prefill", "decode_heavy", "mixed"} {
		full, err := sweep.LoadConfig(filepath.Join("..", "..", "experiments", "si-qwen-"+w+".json"))
		require.NoError(t, err)
		small, err := sweep.LoadConfig(filepath.Join("..", "..", "experiments", "si-qwen-"+w+"-cpu.json"))
		require.NoError(t, err)
		assert.Equal(t, "prompts/"+w+".jsonl", full.Prompts)
		assert.Equal(t, full.Prompts, small.Prompts)
		assert.Equal(t, "Qwen/Qwen2.5-0.5B-Instruct", full.Model)
		for _, c := range []*sweep.Config{full, small} {
			ec, err := tinyserve.DecodeConfigJSON(c.Target.Engine)
			require.NoError(t, err)
			assert.Equal(t, "qwen2.5-0.5b-random", ec.Model)
			assert.Equal(t, c.Model, ec.ServedModelName)
			assert.Equal(t, 2200, ec.MaxModelLen, "serving-inference's --max-model-len")
		}
		fe, _ := tinyserve.DecodeConfigJSON(full.Target.Engine)
		se, _ := tinyserve.DecodeConfigJSON(small.Target.Engine)
		assert.Equal(t, "cuda", fe.Backend)
		assert.Equal(t, "cpu", se.Backend)
		assert.Less(t, small.NumRequests, full.NumRequests)
	}
}

func TestScenarioSettings(t *testing.T) {
	for name, blocks := range map[string]int{"latency_c1": 256, "queue_c8": 256, "kv_pressure": 32} {
		cfg, err := sweep.LoadConfig(filepath.Join("..", "..", "experiments", "sweep-"+name+".json"))
		require.NoError(t, err)
		ec, err := tinyserve.DecodeConfigJSON(cfg.Target.Engine)
		require.NoError(t, err)
		assert.Equal(t, 4, ec.MaxNumSeqs)
		assert.Equal(t, 64, ec.MaxNumBatchedTokens)
		assert.Equal(t, 16, ec.BlockSize)
		assert.Equal(t, blocks, ec.NumBlocks, name)
	}
}
