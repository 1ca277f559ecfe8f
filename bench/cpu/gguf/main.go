// Command gguf converts a checkpoint (a Hugging Face folder, or a built-in
// model name) into a GGUF v3 file for llama.cpp, so that
// bench/cpu/llamacpp.sh can run llama.cpp on the same weights as tinyserve.
// The conversion is model.WriteGGUF (llm/model/gguf_write.go) with the
// vocabulary from llm/tokenizer:
//
//   - GPT-2 as llama.cpp's "gpt2" architecture with GPT-2's tokenizer,
//     float32 unless -type says otherwise;
//   - Qwen2 and Qwen3 (qwen2.5-0.5b-random, Qwen2.5, Qwen3) as "qwen2" and
//     "qwen3" with the folder's tokenizer.json, else the built-in Qwen
//     tokenizer, bfloat16 unless -type says otherwise;
//   - Llama as "llama" (query and key rows permuted as llama.cpp's
//     converter does, Llama 3's rope scaling as rope_freqs) with the
//     folder's or -tokenizer's tokenizer.json, bfloat16 by default.
//
// -type q8_0 writes ggml's Q8_0 (tensor.QuantizeQ8_0, the same bytes as
// llama.cpp's reference quantizer), -type q4_0 its Q4_0
// (gguf.QuantizeQ4_0, likewise; tinyserve reads it back as Q8_0). Norm
// gains and biases are float32 in every case.
//
//	go run ./bench/cpu/gguf -in CKPT_DIR -out model.gguf [-type f32|f16|bf16|q8_0|q4_0] [-tokenizer tokenizer.json]
//
// With -greedy it instead prints, as one JSON object, the ids tinyserve's
// CPU backend generates greedily on the checkpoint (a GGUF file too) from
// the fixed prompt the peers' checks use (tsbench's token ids for
// sequence 0), with the top-1 minus top-2 logit margin of every step, so
// that another engine's tokens can be compared with them:
//
//	go run ./bench/cpu/gguf -in CKPT_DIR -greedy -prompt-len 32 -n 16
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/tinyserve/tinyserve/llm/cpu"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/gguf"
	"github.com/tinyserve/tinyserve/llm/model"
	"github.com/tinyserve/tinyserve/llm/tensor"
	"github.com/tinyserve/tinyserve/llm/tokenizer"
)

func main() {
	in := flag.String("in", "", "checkpoint folder (config.json + model.safetensors), a built-in model name, or with -greedy a GGUF file")
	out := flag.String("out", "", "GGUF file to write")
	greedy := flag.Bool("greedy", false, "print tinyserve's greedy token ids instead of converting")
	promptLen := flag.Int("prompt-len", 32, "with -greedy: prompt length in tokens")
	n := flag.Int("n", 16, "with -greedy: tokens to generate")
	threads := flag.Int("threads", 0, "with -greedy: backend threads (0: GOMAXPROCS)")
	typ := flag.String("type", "", "how the file stores the matrices: f32, f16, bf16, q8_0 or q4_0 (default: f32 for GPT-2, bf16 otherwise)")
	tok := flag.String("tokenizer", "", "the tokenizer.json to write (default: the checkpoint folder's, else the built-in one for GPT-2 and Qwen)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("gguf: ")
	if *in == "" || (*out == "") == !*greedy {
		fmt.Fprintln(os.Stderr, "usage: gguf -in CKPT -out FILE.gguf [-type f32|f16|bf16|q8_0|q4_0] [-tokenizer tokenizer.json] | gguf -in CKPT -greedy [-prompt-len 32] [-n 16]")
		os.Exit(2)
	}
	wtype, ok := map[string]tensor.DType{"": "", "f32": tensor.F32, "f16": tensor.F16, "bf16": tensor.BF16, "q8_0": tensor.Q8_0, "q4_0": model.GGUFQ4_0}[*typ]
	if !ok {
		log.Fatalf("-type %q: want f32, f16, bf16, q8_0 or q4_0", *typ)
	}
	m, err := model.OpenWith(*in, model.OpenOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	if *greedy {
		res, err := greedyIDs(m, *promptLen, *n, *threads)
		if err != nil {
			log.Fatal(err)
		}
		if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
			log.Fatal(err)
		}
		return
	}
	if wtype == "" {
		wtype = tensor.BF16
		if m.Config.Arch == model.ArchGPT2 {
			wtype = tensor.F32
		}
	}
	meta, err := tokenizerMeta(m, *tok)
	if err != nil {
		log.Fatal(err)
	}
	if err := writeFile(m, *out, model.GGUFOptions{Type: wtype, Metadata: meta}); err != nil {
		log.Fatal(err)
	}
}

// tokenizerMeta is the tokenizer.ggml.* metadata (and the chat template,
// when the tokenizer's folder has one) for m.
func tokenizerMeta(m *model.Model, path string) ([]gguf.KV, error) {
	if path == "" && m.Source.Dir != "" {
		if p := filepath.Join(m.Source.Dir, "tokenizer.json"); fileExists(p) {
			path = p
		}
	}
	var (
		v   *tokenizer.GGUFVocab
		err error
	)
	pre := map[model.Arch]string{model.ArchGPT2: "gpt-2", model.ArchLlama: "llama-bpe", model.ArchQwen2: "qwen2", model.ArchQwen3: "qwen2"}[m.Config.Arch]
	switch {
	case path != "":
		v, err = tokenizer.HFGGUFVocab(path, pre, m.Config.VocabSize)
	case m.Config.Arch == model.ArchGPT2:
		v, err = tokenizer.GPT2GGUFVocab()
	case m.Config.Arch == model.ArchQwen2 || m.Config.Arch == model.ArchQwen3:
		v, err = tokenizer.QwenGGUFVocab(m.Config.VocabSize)
	default:
		return nil, fmt.Errorf("model %q: no tokenizer.json beside it: give -tokenizer", m.Name)
	}
	if err != nil {
		return nil, err
	}
	meta := v.KVs()
	cfgJSON := []byte(nil)
	switch {
	case path != "":
		cfgJSON, _ = os.ReadFile(filepath.Join(filepath.Dir(path), "tokenizer_config.json"))
	case m.Config.Arch == model.ArchQwen2 || m.Config.Arch == model.ArchQwen3:
		cfgJSON = tokenizer.QwenConfigJSON()
	}
	var cfg struct {
		ChatTemplate any `json:"chat_template"`
	}
	if json.Unmarshal(cfgJSON, &cfg) == nil {
		if s, ok := cfg.ChatTemplate.(string); ok && s != "" {
			meta = append(meta, gguf.KV{Key: "tokenizer.chat_template", Value: s})
		}
	}
	return meta, nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func writeFile(m *model.Model, path string, opts model.GGUFOptions) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := model.WriteGGUF(m, f, opts); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// promptIDs are tsbench's deterministic prompt ids for sequence s.
func promptIDs(s, n, vocab int) []int {
	t := make([]int, n)
	for i := range t {
		t[i] = (s*7919 + i*104729) % vocab
	}
	return t
}

// greedyResult is what -greedy prints.
type greedyResult struct {
	Prompt []int `json:"prompt"`
	Tokens []int `json:"tokens"`
	// Top are the five largest logits after the prompt, [id, logit].
	Top [][2]float64 `json:"top"`
	// Margins are, for each generated token, its logit minus the
	// second-largest one: how near a tie the greedy choice was.
	Margins []float64 `json:"margins"`
}

// greedyIDs generates n tokens greedily after promptIDs(0, promptLen)
// with tinyserve's CPU backend.
func greedyIDs(m *model.Model, promptLen, n, threads int) (*greedyResult, error) {
	if promptLen < 1 || n < 1 || promptLen+n > m.Config.MaxPositions {
		return nil, fmt.Errorf("prompt of %d tokens plus %d new ones does not fit in %d positions", promptLen, n, m.Config.MaxPositions)
	}
	b, err := cpu.New(m, cpu.Options{Threads: threads})
	if err != nil {
		return nil, err
	}
	defer b.Close()
	const blockSize = 16
	blocks := (promptLen + n + blockSize - 1) / blockSize
	if err := b.AllocateKV(blocks, blockSize); err != nil {
		return nil, err
	}
	table := make([]int32, blocks)
	for i := range table {
		table[i] = int32(i)
	}
	res := &greedyResult{Prompt: promptIDs(0, promptLen, m.Config.VocabSize)}
	seq := engine.SeqBatch{Tokens: res.Prompt, BlockTable: table, Sample: true, NeedLogits: true}
	for len(res.Tokens) < n {
		rows, err := b.Forward(&engine.Batch{Seqs: []engine.SeqBatch{seq}, NumTokens: len(seq.Tokens)})
		if err != nil {
			return nil, err
		}
		next := rows[0].Argmax // the backend's argmax, ties to the lowest id
		lg := rows[0].Logits
		if lg == nil {
			return nil, fmt.Errorf("the backend returned no logits")
		}
		if res.Top == nil {
			res.Top = top5(lg)
		}
		res.Margins = append(res.Margins, margin(lg, next))
		res.Tokens = append(res.Tokens, next)
		seq.StartPos += len(seq.Tokens)
		seq.Tokens = []int{next}
	}
	return res, nil
}

// margin is x[best] minus the largest other value of x.
func margin(x []float32, best int) float64 {
	second := math.Inf(-1)
	for i, v := range x {
		if i != best {
			second = max(second, float64(v))
		}
	}
	return float64(x[best]) - second
}

func top5(x []float32) [][2]float64 {
	ids := make([]int, len(x))
	for i := range ids {
		ids[i] = i
	}
	slices.SortStableFunc(ids, func(a, b int) int {
		switch {
		case x[a] > x[b]:
			return -1
		case x[a] < x[b]:
			return 1
		}
		return 0
	})
	out := make([][2]float64, 5)
	for i := range out {
		out[i] = [2]float64{float64(ids[i]), float64(x[ids[i]])}
	}
	return out
}
