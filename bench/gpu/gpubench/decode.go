package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tinyserve/tinyserve/llm/cuda"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/kv"
	"github.com/tinyserve/tinyserve/llm/model"
)

// decodeRow is one measured configuration of decodeCmd.
type decodeRow struct {
	dtype, quant  string
	batch         int
	msPerStep     float64
	weightBytes   int
	scratchBytes  int
	steps, warmup int
}

// decodeCmd times the decode step of a model on the GPU, with its weights
// as they are (cast to each -dtypes type) and then quantized (-quantization
// q8_0: the weights stay 8-bit on the device, see llm/cuda/q8.go), at each
// -batches size: every sequence one token at position -position, CUDA
// graphs on as the tools run it (-graphs=false for eager steps). It prints a
// Markdown table of ms/step, the quantized step's time over the unquantized
// one's, and the weights' device memory.
func decodeCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("decode", flag.ContinueOnError)
	fs.SetOutput(stderr)
	modelName := fs.String("model", model.Builtin124M, "built-in model name or checkpoint folder")
	dtypes := fs.String("dtypes", "float16,bfloat16", "comma-separated CUDA storage types")
	quant := fs.String("quantization", model.QuantQ8_0, "the quantization to compare with (q8_0), or none for the unquantized rows alone")
	batchList := fs.String("batches", "1,4", "comma-separated decode batch sizes")
	steps := fs.Int("steps", 200, "timed steps per row")
	warmup := fs.Int("warmup", 10, "untimed steps first (buffers grown, graphs captured)")
	position := fs.Int("position", 128, "the context each sequence decodes at")
	graphs := fs.Bool("graphs", true, "replay the steps from CUDA graphs (cuda.Options.CUDAGraphs)")
	out := fs.String("out", "", "also write the table here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	q, err := model.ParseQuantization(*quant)
	if err != nil {
		return err
	}
	var batches []int
	for _, f := range strings.Split(*batchList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-batches: %q is not a batch size", f)
		}
		batches = append(batches, n)
	}
	if *steps < 1 || *warmup < 0 || *position < 1 {
		return errors.New("-steps must be positive, -warmup not negative, -position positive")
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	m, err := model.OpenWith(*modelName, model.OpenOptions{})
	if err != nil {
		return err
	}
	defer m.Close()
	var rows []decodeRow
	device := ""
	measure := func(label string) error {
		for _, dt := range strings.Split(*dtypes, ",") {
			dt = strings.TrimSpace(dt)
			r, dev, err := timeDecode(m, dt, batches, *steps, *warmup, *position, *graphs, log)
			if err != nil {
				return fmt.Errorf("%s %s: %w", label, dt, err)
			}
			device = dev
			for i := range r {
				r[i].quant = label
			}
			rows = append(rows, r...)
		}
		return nil
	}
	if err := measure("none"); err != nil {
		return err
	}
	if q != "" {
		t0 := time.Now()
		if err := m.Quantize(q); err != nil {
			return err
		}
		log.Info("quantized", "quantization", q, "took", time.Since(t0).Round(time.Millisecond))
		if err := measure(q); err != nil {
			return err
		}
	}
	table := decodeTable(m.Name, device, *graphs, *position, rows)
	if _, err := io.WriteString(stdout, table); err != nil {
		return err
	}
	if *out != "" {
		return os.WriteFile(*out, []byte(table), 0o644)
	}
	return nil
}

// timeDecode builds a backend of m in dt and times its decode steps at
// each batch size (one backend for all of them, KV for the largest).
func timeDecode(m *model.Model, dt string, batches []int, steps, warmup, position int, graphs bool, log *slog.Logger) ([]decodeRow, string, error) {
	blocksPer := (position + 1 + 15) / 16
	most := 0
	for _, n := range batches {
		most = max(most, n)
	}
	b, err := cuda.NewBackend(m, cuda.Options{DType: dt, NumBlocks: most * blocksPer, LibDir: cuda.LibDirFromEnv(), Logger: log, CUDAGraphs: graphs})
	if err != nil {
		return nil, "", err
	}
	defer b.Close()
	if err := b.AllocateKV(most*blocksPer, 16); err != nil {
		return nil, "", err
	}
	name, arch := b.Device()
	var rows []decodeRow
	for _, n := range batches {
		batch, err := decodeStep(b, m.Config.VocabSize, n, position, blocksPer)
		if err != nil {
			return nil, "", err
		}
		for range warmup {
			if _, err := b.Forward(batch); err != nil {
				return nil, "", err
			}
		}
		t0 := time.Now()
		for range steps {
			if _, err := b.Forward(batch); err != nil {
				return nil, "", err
			}
		}
		ms := float64(time.Since(t0).Microseconds()) / 1000 / float64(steps)
		rows = append(rows, decodeRow{dtype: b.DType(), batch: n, msPerStep: ms, weightBytes: b.WeightBytes(), scratchBytes: b.DequantScratchBytes(), steps: steps, warmup: warmup})
		log.Info("decode", "dtype", b.DType(), "q8_0", b.Q8_0(), "batch", n, "ms_per_step", fmt.Sprintf("%.4f", ms))
	}
	// The KV manager of the batches is dropped with the backend.
	return rows, fmt.Sprintf("%s (sm_%d)", name, arch), nil
}

// decodeStep prefills seqs sequences of position made-up tokens on b (a KV
// manager of its own, blocksPer blocks each) and returns the batch that
// decodes one token of each at that position. Replaying it rewrites the
// same cache slot: every step costs the same.
func decodeStep(b *cuda.Backend, vocab, seqs, position, blocksPer int) (*engine.Batch, error) {
	mgr, err := kv.New(seqs*blocksPer, 16)
	if err != nil {
		return nil, err
	}
	batch := &engine.Batch{}
	for i := range seqs {
		id := kv.SeqID(i + 1)
		if ok, err := mgr.Allocate(id, position+1); err != nil || !ok {
			return nil, fmt.Errorf("KV for sequence %d: %v %v", i, ok, err)
		}
		toks := make([]int, position)
		for j := range toks {
			toks[j] = (i*7919 + j*104729) % vocab
		}
		pre := &engine.Batch{NumTokens: position, Seqs: []engine.SeqBatch{{ID: id, Tokens: toks, BlockTable: mgr.BlockTable(id), Sample: true}}}
		if _, err := b.Forward(pre); err != nil {
			return nil, err
		}
		batch.Seqs = append(batch.Seqs, engine.SeqBatch{ID: id, Tokens: []int{(i + 1) % vocab}, StartPos: position, BlockTable: mgr.BlockTable(id), Sample: true})
		batch.NumTokens++
	}
	return batch, nil
}

// decodeTable lays the rows out by storage type and batch, the quantized
// time beside the unquantized one and their ratio.
func decodeTable(modelName, device string, graphs bool, position int, rows []decodeRow) string {
	var sb strings.Builder
	mode := "CUDA graphs"
	if !graphs {
		mode = "eager"
	}
	fmt.Fprintf(&sb, "decode step of %s on %s, %s, every sequence at position %d\n\n", modelName, device, mode, position)
	sb.WriteString("| dtype | batch | weights ms/step | q8_0 ms/step | q8_0 / weights | weights MiB | q8_0 MiB (+ prefill scratch) |\n")
	sb.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	type key struct {
		dtype string
		batch int
	}
	quant := map[key]decodeRow{}
	for _, r := range rows {
		if r.quant != "none" {
			quant[key{r.dtype, r.batch}] = r
		}
	}
	for _, r := range rows {
		if r.quant != "none" {
			continue
		}
		fmt.Fprintf(&sb, "| %s | %d | %.4f |", r.dtype, r.batch, r.msPerStep)
		if q, ok := quant[key{r.dtype, r.batch}]; ok {
			fmt.Fprintf(&sb, " %.4f | %.2f | %.1f | %.1f (+ %.1f) |\n", q.msPerStep, q.msPerStep/r.msPerStep,
				float64(r.weightBytes)/(1<<20), float64(q.weightBytes)/(1<<20), float64(q.scratchBytes)/(1<<20))
		} else {
			fmt.Fprintf(&sb, " - | - | %.1f | - |\n", float64(r.weightBytes)/(1<<20))
		}
	}
	return sb.String()
}
