// Command gpubench is the Go half of the GPU device check (bench/gpu/run.sh),
// built on a machine with Go and run on one with a GPU and no Go:
//
//	gpubench checkpoint DIR       write GPT-2 124M (random weights, the built-in
//	                              gpt2-124m-random) as a Hugging Face folder for
//	                              the PyTorch peer
//	gpubench scenarios [flags]    run tiny-vLLM's seven scenarios in-process
//	                              through the engine and write a JSON report
//	gpubench table A.json B.json  print a Markdown table comparing two reports
//	                              (p50/p95 latency, output tok/s, ratio A/B)
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/cuda"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/gpt2"
	"github.com/tinyserve/tinyserve/llm/tokenizer"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "gpubench:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: gpubench checkpoint DIR | scenarios [flags] | table A.json B.json")
	}
	switch args[0] {
	case "checkpoint":
		if len(args) != 2 {
			return errors.New("usage: gpubench checkpoint DIR")
		}
		m, err := gpt2.Builtin(gpt2.Builtin124M)
		if err != nil {
			return err
		}
		return m.WriteCheckpoint(args[1])
	case "scenarios":
		return scenariosCmd(args[1:], stdout, stderr)
	case "table":
		if len(args) != 3 {
			return errors.New("usage: gpubench table A.json B.json")
		}
		a, err := readReport(args[1])
		if err != nil {
			return err
		}
		b, err := readReport(args[2])
		if err != nil {
			return err
		}
		_, err = io.WriteString(stdout, table(a, b))
		return err
	}
	return fmt.Errorf("unknown command %q", args[0])
}

func scenariosCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("scenarios", flag.ContinueOnError)
	fs.SetOutput(stderr)
	backend := fs.String("backend", "cuda", "cuda or cpu")
	model := fs.String("model", gpt2.Builtin124M, "built-in model name or checkpoint folder")
	dtype := fs.String("dtype", "float16", "CUDA dtype: float16, bfloat16, float32")
	requests := fs.Int("requests", 32, "requests per scenario (tiny-vLLM sends 100)")
	only := fs.String("only", "", "comma-separated scenario names (default all)")
	out := fs.String("out", "", "write the JSON report here (default stdout)")
	maxSeqs := fs.Int("max-num-seqs", 4, "tiny-vLLM's comparable setting")
	budget := fs.Int("max-num-batched-tokens", 64, "tiny-vLLM's comparable setting")
	numBlocks := fs.Int("num-blocks", 256, "KV blocks of 16 tokens (tiny-vLLM's comparable setting)")
	timeout := fs.Duration("timeout", 3*time.Minute, "give up after this long")
	graphs := fs.Bool("graphs", false, "replay decode-only steps from CUDA graphs (cuda.Options.CUDAGraphs)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var m *gpt2.Model
	var err error
	if gpt2.IsBuiltin(*model) {
		m, err = gpt2.Builtin(*model)
	} else {
		m, err = gpt2.Load(*model)
	}
	if err != nil {
		return err
	}
	defer m.Close()
	rep := Report{Model: m.Name}
	var be engine.Backend
	switch *backend {
	case "cuda":
		b, err := cuda.NewBackend(m, cuda.Options{DType: *dtype, NumBlocks: *numBlocks, LibDir: cuda.LibDirFromEnv(), Logger: log, CUDAGraphs: *graphs})
		if err != nil {
			return err
		}
		name, arch := b.Device()
		rep.Engine, rep.Device, rep.DType = "tinyserve-cuda", fmt.Sprintf("%s (sm_%d)", name, arch), b.DType()
		if *graphs {
			rep.Engine += "+graphs"
		}
		be = b
	case "cpu":
		b, err := gpt2.NewCPUBackend(m, gpt2.CPUOptions{})
		if err != nil {
			return err
		}
		rep.Engine, rep.Device, rep.DType = "tinyserve-cpu", "cpu", "float32"
		be = b
	default:
		return fmt.Errorf("unknown backend %q", *backend)
	}
	tok, err := tokenizer.GPT2()
	if err != nil {
		return err
	}
	info := m.Info()
	info.Backend = *backend
	eng, err := engine.New(be, tok, info, engine.Config{MaxNumSeqs: *maxSeqs, MaxNumBatchedTokens: *budget, BlockSize: 16, NumBlocks: *numBlocks, Seed: 1, Logger: log})
	if err != nil {
		return err
	}
	defer eng.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	want := map[string]bool{}
	for _, n := range strings.Split(*only, ",") {
		if n != "" {
			want[n] = true
		}
	}
	var llmEng llm.Engine = eng
	for _, s := range scenarios {
		if len(want) > 0 && !want[s.Name] {
			continue
		}
		// One untimed warm-up request of the scenario's shape.
		if _, err := runScenario(ctx, llmEng, Scenario{Name: s.Name + "-warmup", ISL: s.ISL, OSL: s.OSL, Concurrency: 1}, 1, m.Config.VocabSize); err != nil {
			return err
		}
		r, err := runScenario(ctx, llmEng, s, *requests, m.Config.VocabSize)
		if err != nil {
			return err
		}
		log.Info("scenario", "name", s.Name, "output_tok_s", fmt.Sprintf("%.0f", r.OutputTokS), "p50_s", fmt.Sprintf("%.4f", r.LatencyP50S), "p95_s", fmt.Sprintf("%.4f", r.LatencyP95S))
		rep.Results = append(rep.Results, r)
	}
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if *out == "" {
		_, err = stdout.Write(data)
		return err
	}
	return os.WriteFile(*out, data, 0o644)
}

func readReport(path string) (Report, error) {
	var r Report
	data, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// table compares two reports scenario by scenario; a scenario missing from
// b gets dashes, and the ratio is a's output tok/s over b's.
func table(a, b Report) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "A = %s (%s, %s, %s); B = %s (%s, %s)\n\n", a.Engine, a.Model, a.DType, a.Device, b.Engine, b.DType, b.Device)
	sb.WriteString("| scenario | c | req | A p50 ms | A p95 ms | A out tok/s | B p50 ms | B p95 ms | B out tok/s | A/B tok/s |\n")
	sb.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	byName := map[string]Result{}
	for _, r := range b.Results {
		byName[r.Name] = r
	}
	for _, r := range a.Results {
		fmt.Fprintf(&sb, "| %s | %d | %d | %.1f | %.1f | %.0f |", r.Name, r.Concurrency, r.Requests, r.LatencyP50S*1000, r.LatencyP95S*1000, r.OutputTokS)
		if o, ok := byName[r.Name]; ok && o.OutputTokS > 0 {
			fmt.Fprintf(&sb, " %.1f | %.1f | %.0f | %.2f |\n", o.LatencyP50S*1000, o.LatencyP95S*1000, o.OutputTokS, r.OutputTokS/o.OutputTokS)
		} else {
			sb.WriteString(" - | - | - | - |\n")
		}
	}
	return sb.String()
}
