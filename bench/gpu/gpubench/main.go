// Command gpubench is the Go half of the GPU device check (bench/gpu/run.sh),
// built on a machine with Go and run on one with a GPU and no Go:
//
//	gpubench checkpoint [-model NAME] DIR
//	                              write a built-in model (default GPT-2 124M
//	                              with random weights, gpt2-124m-random) as a
//	                              Hugging Face folder for the PyTorch peer
//	gpubench scenarios [flags]    run tiny-vLLM's seven scenarios in-process
//	                              through the engine and write a JSON report
//	gpubench decode [flags]       time the decode step with the weights as
//	                              they are (float16, bfloat16) and quantized
//	                              (-quantization q8_0, kept 8-bit on the GPU)
//	                              at a few batch sizes; a Markdown table with
//	                              the ratio
//	gpubench table A.json B.json  print a Markdown table comparing two reports
//	                              (p50/p95 latency, output tok/s, ratio A/B)
//	gpubench fromsweep OUT.json ROOT...
//	                              turn the embedded sweeps' results (each ROOT
//	                              holding a summary.json) into a report, so
//	                              that table can compare them too
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
	"path/filepath"
	"strings"
	"time"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/cpu"
	"github.com/tinyserve/tinyserve/llm/cuda"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/model"
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
		return errors.New("usage: gpubench checkpoint [-model NAME] DIR | scenarios [flags] | decode [flags] | table A.json B.json | fromsweep OUT.json ROOT")
	}
	switch args[0] {
	case "checkpoint":
		fs := flag.NewFlagSet("checkpoint", flag.ContinueOnError)
		fs.SetOutput(stderr)
		modelName := fs.String("model", model.Builtin124M, "built-in model name")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return errors.New("usage: gpubench checkpoint [-model NAME] DIR")
		}
		m, err := model.Builtin(*modelName)
		if err != nil {
			return err
		}
		return m.WriteCheckpoint(fs.Arg(0), "") // in its own stored type
	case "scenarios":
		return scenariosCmd(args[1:], stdout, stderr)
	case "decode":
		return decodeCmd(args[1:], stdout, stderr)
	case "fromsweep":
		if len(args) < 3 {
			return errors.New("usage: gpubench fromsweep OUT.json ROOT")
		}
		rep, err := sweepReport(args[2:])
		if err != nil {
			return err
		}
		data, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(args[1], append(data, '\n'), 0o644)
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
	modelName := fs.String("model", model.Builtin124M, "built-in model name or checkpoint folder")
	dtype := fs.String("dtype", "float16", "CUDA dtype: float16, bfloat16, float32")
	requests := fs.Int("requests", 32, "requests per scenario (tiny-vLLM sends 100)")
	only := fs.String("only", "", "comma-separated scenario names (default all)")
	out := fs.String("out", "", "write the JSON report here (default stdout)")
	maxSeqs := fs.Int("max-num-seqs", 4, "tiny-vLLM's comparable setting")
	budget := fs.Int("max-num-batched-tokens", 64, "tiny-vLLM's comparable setting")
	numBlocks := fs.Int("num-blocks", 256, "KV blocks of 16 tokens (tiny-vLLM's comparable setting)")
	timeout := fs.Duration("timeout", 3*time.Minute, "give up after this long")
	graphs := fs.Bool("graphs", false, "replay decode-only steps from CUDA graphs (cuda.Options.CUDAGraphs)")
	quant := fs.String("quantization", "", "quantize the weights at load: q8_0 (kept 8-bit on the GPU), or none")
	if err := fs.Parse(args); err != nil {
		return err
	}
	q, err := model.ParseQuantization(*quant)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	m, err := model.OpenWith(*modelName, model.OpenOptions{})
	if err != nil {
		return err
	}
	defer m.Close()
	if err := m.Quantize(q); err != nil {
		return err
	}
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
		if q != "" {
			rep.DType += "+" + q
		}
		if *graphs {
			rep.Engine += "+graphs"
		}
		be = b
	case "cpu":
		b, err := cpu.New(m, cpu.Options{})
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
	eng, err := engine.New(be, tok, info, engine.Config{MaxNumSeqs: *maxSeqs, MaxNumBatchedTokens: *budget, BlockSize: 16, NumBlocks: *numBlocks, Seed: new(uint64(1)), Logger: log})
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
		// An untimed warm-up of the scenario's shape, one request per
		// client, so that every batch size it reaches (each CUDA graph it
		// captures) has been seen; hf_peer.py warms up alike.
		warm := s
		warm.Name += "-warmup"
		if _, err := runScenario(ctx, llmEng, warm, s.Concurrency, m.Config.VocabSize); err != nil {
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
// b gets dashes, and the ratio is a's output tok/s over b's, beside b's
// time per step when b reports it (the transformers peer does).
func table(a, b Report) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "A = %s (%s, %s, %s); B = %s (%s, %s)\n\n", a.Engine, a.Model, a.DType, a.Device, b.Engine, b.DType, b.Device)
	sb.WriteString("| scenario | c | req | A p50 ms | A p95 ms | A out tok/s | B p50 ms | B p95 ms | B out tok/s | A/B tok/s | B ms/step |\n")
	sb.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	byName := map[string]Result{}
	for _, r := range b.Results {
		byName[r.Name] = r
	}
	for _, r := range a.Results {
		fmt.Fprintf(&sb, "| %s | %d | %d | %.1f | %.1f | %.0f |", r.Name, r.Concurrency, r.Requests, r.LatencyP50S*1000, r.LatencyP95S*1000, r.OutputTokS)
		if o, ok := byName[r.Name]; ok && o.OutputTokS > 0 {
			step := "-"
			if o.StepMSP50 > 0 {
				step = fmt.Sprintf("%.2f", o.StepMSP50)
			}
			fmt.Fprintf(&sb, " %.1f | %.1f | %.0f | %.2f | %s |\n", o.LatencyP50S*1000, o.LatencyP95S*1000, o.OutputTokS, r.OutputTokS/o.OutputTokS, step)
		} else {
			sb.WriteString(" - | - | - | - | - |\n")
		}
	}
	return sb.String()
}

// sweepSummary is the part of a sweep's summary.json a report needs.
type sweepSummary struct {
	Config struct {
		Name   string `json:"name"`
		Target struct {
			Engine struct {
				Model   string `json:"model"`
				Backend string `json:"backend"`
				DType   string `json:"dtype"`
			} `json:"engine"`
		} `json:"target"`
	} `json:"config"`
	ByConcurrency []struct {
		Concurrency int     `json:"concurrency"`
		DurationS   float64 `json:"duration_s"`
		Counts      struct {
			Successful   int `json:"successful"`
			OutputTokens int `json:"output_tokens"`
		} `json:"counts"`
		OutputTokS float64 `json:"output_token_throughput_per_s"`
		Latency    struct {
			P50 float64 `json:"p50"`
			P95 float64 `json:"p95"`
		} `json:"latency_s"`
		TTFT struct {
			P50 float64 `json:"p50"`
		} `json:"ttft_s"`
	} `json:"by_concurrency"`
}

// sweepReport reads the summary.json of each sweep root, one result per
// concurrency level, named after the config without its "tinyvllm-" prefix
// (so that tiny-vLLM's scenarios line up with the other reports), with
// "@c" appended when a sweep has several levels.
func sweepReport(roots []string) (Report, error) {
	rep := Report{Engine: "tinyserve (embedded sweep, HTTP)"}
	for _, root := range roots {
		var s sweepSummary
		data, err := os.ReadFile(filepath.Join(root, "summary.json"))
		if err != nil {
			return rep, err
		}
		if err := json.Unmarshal(data, &s); err != nil {
			return rep, fmt.Errorf("%s: %w", root, err)
		}
		e := s.Config.Target.Engine
		if rep.Model == "" {
			rep.Model, rep.DType, rep.Device = filepath.Base(e.Model), e.DType, e.Backend
		}
		name := strings.TrimPrefix(s.Config.Name, "tinyvllm-")
		for _, c := range s.ByConcurrency {
			r := Result{Scenario: Scenario{Name: name, Concurrency: c.Concurrency}, Requests: c.Counts.Successful,
				WallS: c.DurationS, OutputTokens: c.Counts.OutputTokens, OutputTokS: c.OutputTokS,
				LatencyP50S: c.Latency.P50, LatencyP95S: c.Latency.P95, TTFTP50S: c.TTFT.P50}
			if len(s.ByConcurrency) > 1 {
				r.Name = fmt.Sprintf("%s@%d", name, c.Concurrency)
			}
			rep.Results = append(rep.Results, r)
		}
	}
	return rep, nil
}
