// Command gguf converts a GPT-2 checkpoint (a Hugging Face folder, or a
// built-in model name) into a GGUF v3 file for llama.cpp's "gpt2"
// architecture, float32 throughout, with GPT-2's tokenizer, so that
// bench/cpu/llamacpp.sh can run llama.cpp on the same weights as tinyserve.
//
//	go run ./bench/cpu/gguf -in CKPT_DIR -out model.gguf
//
// With -greedy it instead prints, as one JSON object, the ids tinyserve's
// CPU backend generates greedily on the checkpoint from the fixed prompt
// the llama.cpp peer's check uses (tsbench's token ids for sequence 0), so
// the two engines' tokens can be compared:
//
//	go run ./bench/cpu/gguf -in CKPT_DIR -greedy -prompt-len 32 -n 16
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"

	"github.com/tinyserve/tinyserve/llm/cpu"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/model"
)

func main() {
	in := flag.String("in", "", "checkpoint folder (config.json + model.safetensors) or a built-in model name")
	out := flag.String("out", "", "GGUF file to write")
	greedy := flag.Bool("greedy", false, "print tinyserve's greedy token ids instead of converting")
	promptLen := flag.Int("prompt-len", 32, "with -greedy: prompt length in tokens")
	n := flag.Int("n", 16, "with -greedy: tokens to generate")
	threads := flag.Int("threads", 0, "with -greedy: backend threads (0: GOMAXPROCS)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("gguf: ")
	if *in == "" || (*out == "") == !*greedy {
		fmt.Fprintln(os.Stderr, "usage: gguf -in CKPT -out FILE.gguf | gguf -in CKPT -greedy [-prompt-len 32] [-n 16]")
		os.Exit(2)
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
	if err := writeFile(m, *out); err != nil {
		log.Fatal(err)
	}
}

func writeFile(m *model.Model, path string) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := convert(m, f); err != nil {
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
		if lg := rows[0].Logits; lg != nil && res.Top == nil {
			res.Top = top5(lg)
		}
		res.Tokens = append(res.Tokens, next)
		seq.StartPos += len(seq.Tokens)
		seq.Tokens = []int{next}
		seq.NeedLogits = false
	}
	return res, nil
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
