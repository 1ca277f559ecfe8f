// Command gguf converts a checkpoint (a Hugging Face folder, or a built-in
// model name) into a GGUF v3 file for llama.cpp, so that
// bench/cpu/llamacpp.sh can run llama.cpp on the same weights as tinyserve:
//
//   - GPT-2 as llama.cpp's "gpt2" architecture with GPT-2's tokenizer,
//     float32 unless -type says otherwise;
//   - Qwen2 (qwen2.5-0.5b-random, Qwen2.5) as llama.cpp's "qwen2"
//     architecture with the built-in Qwen tokenizer, its matrices in
//     bfloat16 (GGUF type BF16, exact for a bfloat16 checkpoint) unless
//     -type says otherwise.
//
// Norm gains and biases are float32 in every case.
//
//	go run ./bench/cpu/gguf -in CKPT_DIR -out model.gguf [-type f32|f16|bf16]
//
// With -greedy it instead prints, as one JSON object, the ids tinyserve's
// CPU backend generates greedily on the checkpoint from the fixed prompt
// the peers' checks use (tsbench's token ids for sequence 0), with the
// top-1 minus top-2 logit margin of every step, so that another engine's
// tokens can be compared with them:
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
	"slices"

	"github.com/tinyserve/tinyserve/llm/cpu"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/model"
	"github.com/tinyserve/tinyserve/llm/tensor"
)

func main() {
	in := flag.String("in", "", "checkpoint folder (config.json + model.safetensors) or a built-in model name")
	out := flag.String("out", "", "GGUF file to write")
	greedy := flag.Bool("greedy", false, "print tinyserve's greedy token ids instead of converting")
	promptLen := flag.Int("prompt-len", 32, "with -greedy: prompt length in tokens")
	n := flag.Int("n", 16, "with -greedy: tokens to generate")
	threads := flag.Int("threads", 0, "with -greedy: backend threads (0: GOMAXPROCS)")
	typ := flag.String("type", "", "how the file stores the matrices: f32, f16 or bf16 (default: f32 for GPT-2, bf16 for Qwen2)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("gguf: ")
	if *in == "" || (*out == "") == !*greedy {
		fmt.Fprintln(os.Stderr, "usage: gguf -in CKPT -out FILE.gguf [-type f32|f16|bf16] | gguf -in CKPT -greedy [-prompt-len 32] [-n 16]")
		os.Exit(2)
	}
	opts := convertOptions{Type: map[string]tensor.DType{"": "", "f32": tensor.F32, "f16": tensor.F16, "bf16": tensor.BF16}[*typ]}
	if opts.Type == "" && *typ != "" {
		log.Fatalf("-type %q: want f32, f16 or bf16", *typ)
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
	if err := writeFile(m, *out, opts); err != nil {
		log.Fatal(err)
	}
}

func writeFile(m *model.Model, path string, opts convertOptions) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := convert(m, f, opts); err != nil {
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
