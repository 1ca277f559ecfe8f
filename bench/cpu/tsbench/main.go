// Command tsbench times tinyserve's GPT-2 CPU backend on the cases of
// bench/cpu (issue 8), driving CPUBackend.Forward directly so that no
// scheduler or HTTP cost is counted:
//
//   - prefill-128, prefill-512: one prompt through every layer, the LM head
//     for its last row only;
//   - decode-bN: one decode step for N sequences whose context is about 140
//     tokens (greedy: argmax only, no logits copied out);
//   - e2e-bN: N 128-token prompts prefilled in one step, then 63 decode
//     steps, 64 greedy tokens per sequence in all.
//
// Each case reports the median of -reps timed runs after one warm-up run.
// With -table FILE it instead prints the JSON results in FILE (its own and
// torch_peer.py's, as bench/cpu/compare.sh collects them) as a table with
// ratios.
//
// It uses only the packages' public API, so compare.sh can build it against
// an older revision for before/after figures.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"time"

	"github.com/tinyserve/tinyserve/internal/f32"
	"github.com/tinyserve/tinyserve/llm/cpu"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/kv"
	"github.com/tinyserve/tinyserve/llm/model"
)

// blockSize is the KV block size the engine uses by default.
const blockSize = 16

// decodeContext is the context length of the decode-step cases, as in the
// issue's measurements ("context about 140").
const decodeContext = 140

// result is one case's figure, one JSON object per line on -json.
type result struct {
	Engine string  `json:"engine"`
	Case   string  `json:"case"`
	MS     float64 `json:"ms"`   // median wall time of one run
	Runs   int     `json:"runs"` // timed runs
	// FloorMS is this machine's floor for the case, for decode steps: the
	// bytes a step must read (float32 matrix weights of the layers and the
	// LM head, plus the keys and values of every sequence's context) over
	// the read bandwidth measured by -bandwidth. Zero when not measured.
	FloorMS float64 `json:"floor_ms,omitempty"`
}

func main() {
	modelName := flag.String("model", model.Builtin124M, "checkpoint folder, or a built-in model name")
	table := flag.String("table", "", "print the JSON results in this file as a table and exit")
	base := flag.String("base", "tinyserve", "with -table: the engine the others are compared with")
	yardstick := flag.Bool("issue-floor", true, "with -table: show base over issue 8's floors for the GPT-2 124M shape")
	markdown := flag.Bool("markdown", false, "with -table: print a Markdown table")
	verify := flag.String("verify", "", "check the engines' configuration lines in this results file (threads from -threads, else GOMAXPROCS) and exit")
	reps := flag.Int("reps", 5, "timed runs per case (the median is reported)")
	threads := flag.Int("threads", 0, "backend threads (0: GOMAXPROCS)")
	dtype := flag.String("dtype", "", "weight storage: float32 (default), bfloat16, or q8_0 (quantized at load, as --quantization q8_0)")
	cases := flag.String("cases", "prefill-128,prefill-512,decode-b1,decode-b4,decode-b8,decode-b32,e2e-b1,e2e-b4", "comma-separated cases")
	name := flag.String("engine", "tinyserve", "engine name printed with each result")
	jsonOut := flag.Bool("json", false, "print one JSON object per case instead of a table row")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the timed cases to this file")
	bandwidth := flag.Bool("bandwidth", false, "measure the read bandwidth first and report each decode step's floor")
	flag.Parse()
	if *table != "" {
		opts := tableOptions{Markdown: *markdown}
		if *yardstick {
			opts.Yardstick = issueFloor
		}
		if err := printTable(os.Stdout, *table, *base, opts); err != nil {
			log.Fatal(err)
		}
		return
	}

	if *verify != "" {
		n := *threads
		if n == 0 {
			n = runtime.GOMAXPROCS(0)
		}
		if err := verifyResults(os.Stdout, *verify, n); err != nil {
			log.Fatal(err)
		}
		return
	}

	m, err := model.OpenWith(*modelName, model.OpenOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	start := time.Now()
	opts := cpu.Options{Threads: *threads}
	elem, err := withWeights(m, &opts, *dtype)
	if err != nil {
		log.Fatal(err)
	}
	b, err := cpu.New(m, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	log.Printf("%s: backend ready in %v (GOMAXPROCS %d, GODEBUG %q)", *name, time.Since(start).Round(time.Millisecond), runtime.GOMAXPROCS(0), os.Getenv("GODEBUG"))
	// Enough blocks for 32 sequences of decodeContext+reps+1 tokens, or
	// four of 192 tokens, or one of 512: whichever is largest.
	perSeq := func(tokens int) int { return (tokens + blockSize - 1) / blockSize }
	numBlocks := max(32*perSeq(decodeContext+*reps+2), 4*perSeq(192), perSeq(512))
	if err := b.AllocateKV(numBlocks, blockSize); err != nil {
		log.Fatal(err)
	}
	r := &runner{b: b, vocab: m.Config.VocabSize, numBlocks: numBlocks}
	var gbs float64
	if *bandwidth {
		gbs = readBandwidth(runtime.GOMAXPROCS(0))
		log.Printf("%s: read bandwidth %.1f GB/s (%d goroutines reading 512 MiB each); decode floor at batch 1 %.1f ms", *name, gbs, runtime.GOMAXPROCS(0), stepBytes(m.Config, elem, 1, decodeContext)/gbs/1e6)
	}
	if *jsonOut {
		// How this engine runs, for compare.sh's check and the record.
		n := *threads
		if n == 0 {
			n = runtime.GOMAXPROCS(0)
		}
		wd := *dtype
		if wd == "" {
			wd = "float32"
		}
		cfg := map[string]any{"go": runtime.Version(), "gomaxprocs": runtime.GOMAXPROCS(0), "threads": n,
			"weight_dtype": wd, "godebug": os.Getenv("GODEBUG"), "model": m.Name}
		if gbs > 0 {
			cfg["read_bandwidth_gbs"] = math.Round(gbs*10) / 10
		}
		out, _ := json.Marshal(map[string]any{"engine": *name, "config": cfg})
		fmt.Println(string(out))
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}

	for _, c := range splitComma(*cases) {
		var times []time.Duration
		for i := range *reps + 1 {
			d, err := r.run(c, i)
			if err != nil {
				log.Panicf("%s: %v", c, err) // unwinds, so the profile is flushed
			}
			if i > 0 { // the first run warms caches and grows buffers
				times = append(times, d)
			}
		}
		slices.Sort(times)
		res := result{Engine: *name, Case: c, MS: float64(times[len(times)/2].Microseconds()) / 1000, Runs: len(times)}
		var seqs int
		if gbs > 0 && sscan(c, "decode-b%d", &seqs) {
			// The context grows by one token per run: take the median run's.
			res.FloorMS = stepBytes(m.Config, elem, seqs, decodeContext+1+len(times)/2) / gbs / 1e6
		}
		if *jsonOut {
			out, _ := json.Marshal(res)
			fmt.Println(string(out))
		} else {
			fmt.Printf("%-10s %-12s %10.2f ms  (median of %d)\n", res.Engine, res.Case, res.MS, res.Runs)
		}
	}
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

// runner builds batches over a fixed block layout: sequence i owns blocks
// [i·per, (i+1)·per), so that the cases never need an allocator.
type runner struct {
	b         *cpu.Backend
	vocab     int
	numBlocks int

	// The decode cases' batch and last sampled rows, kept between runs.
	lastBatch *engine.Batch
	lastRows  []engine.SampleRow
}

// tokens returns n deterministic token ids for sequence s.
func (r *runner) tokens(s, n int) []int {
	t := make([]int, n)
	for i := range t {
		t[i] = (s*7919 + i*104729) % r.vocab
	}
	return t
}

// table returns the block table of sequence s among seqs sequences.
func (r *runner) table(s, seqs int) []int32 {
	per := r.numBlocks / seqs
	t := make([]int32, per)
	for i := range t {
		t[i] = int32(s*per + i)
	}
	return t
}

// prefill runs prompts of n tokens for seqs sequences in one step.
func (r *runner) prefill(seqs, n int) ([]engine.SampleRow, error) {
	batch := &engine.Batch{}
	for s := range seqs {
		batch.Seqs = append(batch.Seqs, engine.SeqBatch{
			ID: kv.SeqID(s), Tokens: r.tokens(s, n), BlockTable: r.table(s, seqs), Sample: true,
		})
	}
	batch.NumTokens = seqs * n
	return r.b.Forward(batch)
}

// decode runs one greedy step for seqs sequences at position pos, feeding
// each the token it sampled last.
func (r *runner) decode(batch *engine.Batch, rows []engine.SampleRow, pos int) ([]engine.SampleRow, error) {
	for s := range batch.Seqs {
		batch.Seqs[s].Tokens[0] = rows[s].Argmax
		batch.Seqs[s].StartPos = pos
	}
	return r.b.Forward(batch)
}

func (r *runner) decodeBatch(seqs int) *engine.Batch {
	batch := &engine.Batch{NumTokens: seqs}
	for s := range seqs {
		batch.Seqs = append(batch.Seqs, engine.SeqBatch{
			ID: kv.SeqID(s), Tokens: make([]int, 1), BlockTable: r.table(s, seqs), Sample: true,
		})
	}
	return batch
}

// run performs run number i of case c and returns the time of the part
// the case measures.
func (r *runner) run(c string, i int) (time.Duration, error) {
	var seqs, n int
	switch {
	case sscan(c, "prefill-%d", &n):
		t := time.Now()
		_, err := r.prefill(1, n)
		return time.Since(t), err
	case sscan(c, "decode-b%d", &seqs):
		// The context is prefilled once (run 0) and each run then times one
		// more step, so the context grows by one token per run.
		if i == 0 {
			rows, err := r.prefill(seqs, decodeContext)
			if err != nil {
				return 0, err
			}
			r.lastBatch, r.lastRows = r.decodeBatch(seqs), rows
		}
		t := time.Now()
		rows, err := r.decode(r.lastBatch, r.lastRows, decodeContext+i)
		d := time.Since(t)
		r.lastRows = slices.Clone(rows)
		return d, err
	case sscan(c, "e2e-b%d", &seqs):
		t := time.Now()
		rows, err := r.prefill(seqs, 128)
		if err != nil {
			return 0, err
		}
		rows = slices.Clone(rows)
		batch := r.decodeBatch(seqs)
		for step := range 63 {
			out, err := r.decode(batch, rows, 128+step)
			if err != nil {
				return 0, err
			}
			copy(rows, out)
		}
		return time.Since(t), nil
	}
	return 0, fmt.Errorf("unknown case %q", c)
}

func sscan(s, format string, n *int) bool {
	var tail string
	k, _ := fmt.Sscanf(s+" end", format+" %s", n, &tail)
	return k == 2 && tail == "end"
}

// readBandwidth measures how fast threads goroutines can read memory: each
// reads its own 512 MiB buffer (far beyond any cache), allocated as the
// backend allocates weights and KV (huge pages where granted, resident
// before timing), with the vectorised dot-product kernel of a vector with
// itself, one FMA per 64 bytes, so the arithmetic never limits it; the
// best of five passes counts. A plain bytes.IndexByte scan over Go heap
// memory read 10-20% slower on the VMs measured, which would flatter every
// ratio to this floor.
func readBandwidth(threads int) float64 {
	const floats = 512 << 20 / 4
	bufs := make([]*f32.Buffer, threads)
	for i := range bufs {
		bufs[i] = f32.NewBuffer(floats)
	}
	best := 0.0
	for range 5 {
		var wg sync.WaitGroup
		start := time.Now()
		for _, b := range bufs {
			wg.Go(func() {
				x := b.Floats()
				if f32.Dot(x, x) != 0 {
					panic("unreachable: the buffer is zero")
				}
			})
		}
		wg.Wait()
		best = max(best, float64(threads*floats*4)/time.Since(start).Seconds()/1e9)
	}
	return best
}
