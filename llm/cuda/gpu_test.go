package cuda

// GPU tests: they run where NewBackend finds the CUDA libraries and a GPU
// and skip, saying why, elsewhere. The device check (bench/gpu/run.sh) sets
// TINYSERVE_CUDA_REQUIRE=1, which turns those skips into failures.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/kv"
	"github.com/tinyserve/tinyserve/llm/model"
)

// fixtures is the repository's top-level test fixture folder.
const fixtures = "../../testdata"

// goldenCheckpoints are the fixtures and the float32 tolerance their README
// suggests for logits (gpt2-tiny 1e-5; gpt2-tiny-hot, with 5x larger
// logits, 5e-5), as llm/cpu's golden tests use.
var goldenCheckpoints = []goldenCheckpoint{{"gpt2-tiny", 1e-5}, {"gpt2-tiny-hot", 5e-5}}

// goldenCheckpoint is a GPT-2 golden fixture and its float32 tolerance.
type goldenCheckpoint struct {
	name string
	tol  float64
}

// Half-precision tolerances on the CPU's top-10 logits, relative to the
// largest |logit| of the row: float16 keeps 11 significant bits (weights,
// KV and GEMM inputs rounded at 4.9e-4 relative), bfloat16 8 bits (3.9e-3).
// Errors compound over the layers; these bounds are about 10x the
// per-rounding error and are to be confirmed by the first GPU run, which
// logs the observed maxima.
const (
	tolFloat16Rel  = 1e-2
	tolBFloat16Rel = 4e-2
)

type goldenCase struct {
	Name     string `json:"name"`
	InputIDs []int  `json:"input_ids"`
	Top10    struct {
		IDs    []int     `json:"ids"`
		Values []float64 `json:"values"`
	} `json:"last_logits_top10"`
	Greedy struct {
		Tokens  []int     `json:"tokens"`
		Margins []float64 `json:"margins"`
	} `json:"greedy"`
}

// loadGoldenCases opens the checkpoint testdata/name and reads its
// golden.json (the GPT-2 and the Llama-family goldens share the fields
// read here). A fixture that is not there at all skips the test: the
// device check's copy of testdata/ leaves gpt2-tiny-hot out
// (bench/gpu/build.sh), and says which it skipped.
func loadGoldenCases(t *testing.T, name string) (*model.Model, []goldenCase) {
	t.Helper()
	dir := filepath.Join(fixtures, name)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		t.Skipf("fixture testdata/%s is not here", name)
	}
	m, err := model.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	data, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Cases []goldenCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Cases) < 6 {
		t.Fatalf("%s: %d golden cases, want at least 6", name, len(g.Cases))
	}
	return m, g.Cases
}

// newDevice returns a backend with KV for numBlocks blocks of 16: on the
// GPU (newGPUOpts) or on the host emulation of the kernels (newEmuBackend,
// emu_test.go). The correctness tests below run on both.
type newDevice func(t testing.TB, m *model.Model, opts Options, numBlocks int) *Backend

// newGPUOpts returns a backend on the GPU, or skips the test where there is
// none.
func newGPUOpts(t testing.TB, m *model.Model, opts Options, numBlocks int) *Backend {
	t.Helper()
	opts.LibDir, opts.CacheDir = LibDirFromEnv(), gpuKernelCache
	b, err := NewBackend(m, opts)
	if err != nil {
		var nf *NotFoundError
		if (errors.As(err, &nf) || errors.Is(err, ErrNoDevice)) && os.Getenv("TINYSERVE_CUDA_REQUIRE") != "1" {
			t.Skipf("no GPU here (set TINYSERVE_CUDA_REQUIRE=1 to make this a failure): %v", err)
		}
		t.Fatalf("NewBackend: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	name, arch := b.Device()
	t.Logf("GPU %s (sm_%d), dtype %s", name, arch, b.DType())
	if err := b.AllocateKV(numBlocks, 16); err != nil {
		t.Fatal(err)
	}
	return b
}

// stepper drives a backend the way the engine does, with its own kv
// manager handing out block ids.
type stepper struct {
	t  *testing.T
	b  engine.Backend
	kv *kv.Manager
}

func newStepper(t *testing.T, b engine.Backend, numBlocks int) *stepper {
	mgr, err := kv.New(numBlocks, 16)
	if err != nil {
		t.Fatal(err)
	}
	return &stepper{t: t, b: b, kv: mgr}
}

type part struct {
	id           kv.SeqID
	tokens       []int
	start        int
	sample       bool
	needLogits   bool
	promptLogits bool
}

// step runs one batch and returns copies of the sampled rows.
func (s *stepper) step(parts ...part) []engine.SampleRow {
	s.t.Helper()
	batch := &engine.Batch{}
	for _, p := range parts {
		if ok, err := s.kv.Allocate(p.id, p.start+len(p.tokens)); err != nil || !ok {
			s.t.Fatalf("allocate seq %d: ok=%v err=%v", p.id, ok, err)
		}
		batch.Seqs = append(batch.Seqs, engine.SeqBatch{ID: p.id, Tokens: p.tokens, StartPos: p.start,
			BlockTable: s.kv.BlockTable(p.id), Sample: p.sample, NeedLogits: p.needLogits, PromptLogits: p.promptLogits})
		batch.NumTokens += len(p.tokens)
	}
	rows, err := s.b.Forward(batch)
	if err != nil {
		s.t.Fatal(err)
	}
	out := make([]engine.SampleRow, len(rows))
	for i, r := range rows {
		out[i] = engine.SampleRow{Logits: slices.Clone(r.Logits), Argmax: r.Argmax}
	}
	return out
}

const goldenBlocks = 6 * 64

// hotFixture is gpt2-tiny-hot, the GPT-2 golden whose larger logits make
// subtle errors show, which several checks use; where a copy of testdata/
// lacks it (the device check carries gpt2-tiny only, to stay within the
// device tool's 64 MiB), gpt2-tiny, whose prompts have the same lengths.
func hotFixture(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(fixtures, "gpt2-tiny-hot")); errors.Is(err, fs.ErrNotExist) {
		t.Logf("testdata/gpt2-tiny-hot is not here: gpt2-tiny instead")
		return "gpt2-tiny"
	}
	return "gpt2-tiny-hot"
}

// goldenLimits say which golden prompts a check takes: those of at most
// maxPrompt tokens, of the checkpoints named (every one of the check's
// family when none is). The GPU takes them all; the emulator, which runs
// each CUDA thread as a fiber, leaves out the longest outside a few tests,
// and takes few under the race detector (emuLimits).
type goldenLimits struct {
	maxPrompt   int
	checkpoints []string
}

// allGoldens takes every prompt of every checkpoint.
var allGoldens = goldenLimits{maxPrompt: math.MaxInt}

// takes reports whether the limits take checkpoint name.
func (l goldenLimits) takes(name string) bool {
	return len(l.checkpoints) == 0 || slices.Contains(l.checkpoints, name)
}

// gpt2 are the GPT-2 golden checkpoints the limits take.
func (l goldenLimits) gpt2() []goldenCheckpoint {
	var out []goldenCheckpoint
	for _, ck := range goldenCheckpoints {
		if l.takes(ck.name) {
			out = append(out, ck)
		}
	}
	return out
}

// TestGPUGoldenGreedyFloat32: in float32 mode each golden prompt, prefilled
// in one chunk, gives the golden's top-10 logits and then, decoding with
// the device argmax only (no logits copied back), the golden's 16 greedy
// tokens exactly.
func TestGPUGoldenGreedyFloat32(t *testing.T) { checkGoldenGreedyFloat32(t, newGPUOpts, allGoldens) }

func checkGoldenGreedyFloat32(t *testing.T, newDev newDevice, lim goldenLimits) {
	for _, ck := range lim.gpt2() {
		t.Run(ck.name, func(t *testing.T) {
			m, cases := loadGoldenCases(t, ck.name)
			b := newDev(t, m, Options{DType: "float32"}, goldenBlocks)
			s := newStepper(t, b, goldenBlocks)
			worst := 0.0
			for i, c := range cases {
				if len(c.InputIDs) > lim.maxPrompt {
					continue
				}
				id := kv.SeqID(i + 1)
				rows := s.step(part{id: id, tokens: c.InputIDs, sample: true, needLogits: true})
				if len(rows) != 1 || rows[0].Logits == nil {
					t.Fatalf("%s: prefill returned %d rows / no logits", c.Name, len(rows))
				}
				for j, tok := range c.Top10.IDs {
					d := math.Abs(float64(rows[0].Logits[tok]) - c.Top10.Values[j])
					worst = max(worst, d)
					if d > ck.tol {
						t.Errorf("%s: logit[%d] = %.9g, golden %.9g", c.Name, tok, rows[0].Logits[tok], c.Top10.Values[j])
					}
				}
				got := []int{rows[0].Argmax}
				pos := len(c.InputIDs)
				for len(got) < len(c.Greedy.Tokens) {
					r := s.step(part{id: id, tokens: []int{got[len(got)-1]}, start: pos, sample: true})
					if r[0].Logits != nil {
						t.Fatalf("%s: logits returned for a greedy row", c.Name)
					}
					got = append(got, r[0].Argmax)
					pos++
				}
				if !slices.Equal(got, c.Greedy.Tokens) {
					t.Errorf("%s: greedy tokens %v, golden %v", c.Name, got, c.Greedy.Tokens)
				}
				if err := s.kv.Free(id); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("max |device float32 - golden| over top-10 logits: %.3g (tolerance %.0e)", worst, ck.tol)
		})
	}
}

// TestGPUMixedBatchesMatchCPU runs the six prompts concurrently on the GPU
// (float32) and on the CPU backend with the same schedule: chunked
// prefills of 13 tokens mixed with decodes of the sequences already past
// their prompt, alternating rows that need logits and rows that need only
// the argmax. Every step's argmax must agree and logits stay within the
// fixture's tolerance.
func TestGPUMixedBatchesMatchCPU(t *testing.T) { checkMixedBatchesMatchCPU(t, newGPUOpts, allGoldens) }

func checkMixedBatchesMatchCPU(t *testing.T, newDev newDevice, lim goldenLimits) {
	for _, ck := range lim.gpt2() {
		t.Run(ck.name, func(t *testing.T) {
			m, cases := loadGoldenCases(t, ck.name)
			gb := newDev(t, m, Options{DType: "float32"}, goldenBlocks)
			cb := cpuBackend(t, m, goldenBlocks)
			var prompts [][]int
			for _, c := range cases {
				if len(c.InputIDs) <= lim.maxPrompt {
					prompts = append(prompts, c.InputIDs)
				}
			}
			worst := compareMixed(t, gb, cb, prompts, goldenBlocks, 13, 6)
			if worst > ck.tol {
				t.Errorf("max |GPU - CPU| logit %.3g over the tolerance %.0e", worst, ck.tol)
			}
			t.Logf("max |device float32 - CPU| over all returned logits: %.3g", worst)
		})
	}
}

// TestGPUPromptLogitsMatchCPU: sequences with PromptLogits get a row of
// logits per token, in batch order among the other sampled rows, equal to
// the CPU backend's (whose rows the golden per-position argmax checks),
// across chunks and next to rows that need only the argmax.
func TestGPUPromptLogitsMatchCPU(t *testing.T) { checkPromptLogitsMatchCPU(t, newGPUOpts) }

func checkPromptLogitsMatchCPU(t *testing.T, newDev newDevice) {
	m, cases := loadGoldenCases(t, hotFixture(t))
	gb := newDev(t, m, Options{DType: "float32"}, goldenBlocks)
	cb := cpuBackend(t, m, goldenBlocks)
	gs, cs := newStepper(t, gb, goldenBlocks), newStepper(t, cb, goldenBlocks)
	p33, p7 := cases[2].InputIDs, cases[1].InputIDs
	if len(p33) != 33 || len(p7) != 7 {
		t.Fatalf("golden prompts of %d and %d tokens, want 33 and 7", len(p33), len(p7))
	}
	steps := [][]part{{
		{id: 1, tokens: p33[:13], promptLogits: true},
		{id: 2, tokens: p33, sample: true},
		{id: 3, tokens: p7, sample: true, promptLogits: true},
	}, {
		{id: 1, tokens: p33[13:], start: 13, sample: true, promptLogits: true},
		{id: 2, tokens: []int{7}, start: 33, sample: true, needLogits: true},
	}}
	wantRows := []int{13 + 1 + 7, 20 + 1}
	worst := 0.0
	for i, parts := range steps {
		gr, cr := gs.step(parts...), cs.step(parts...)
		if len(gr) != wantRows[i] || len(cr) != wantRows[i] {
			t.Fatalf("step %d: %d device rows, %d CPU rows, want %d", i, len(gr), len(cr), wantRows[i])
		}
		for k := range gr {
			if gr[k].Argmax != cr[k].Argmax {
				t.Errorf("step %d row %d: argmax %d, CPU %d", i, k, gr[k].Argmax, cr[k].Argmax)
			}
			if (gr[k].Logits == nil) != (cr[k].Logits == nil) {
				t.Fatalf("step %d row %d: device logits %v, CPU logits %v", i, k, gr[k].Logits != nil, cr[k].Logits != nil)
			}
			for v := range gr[k].Logits {
				worst = max(worst, math.Abs(float64(gr[k].Logits[v]-cr[k].Logits[v])))
			}
		}
	}
	if worst > 5e-5 {
		t.Errorf("max |device - CPU| over the prompt logits %.3g, over 5e-5", worst)
	}
	t.Logf("max |device float32 - CPU| over prompt logits: %.3g", worst)
}

// TestGPUHalfTop10: in float16 and bfloat16 the logits of the CPU's top-10
// ids at the last prompt position agree with the CPU backend within the
// stated tolerance, relative to the row's largest |logit|.
func TestGPUHalfTop10(t *testing.T) { checkHalfTop10(t, newGPUOpts, allGoldens) }

func checkHalfTop10(t *testing.T, newDev newDevice, lim goldenLimits) {
	for _, dt := range []struct {
		name string
		rel  float64
	}{{"float16", tolFloat16Rel}, {"bfloat16", tolBFloat16Rel}} {
		for _, ck := range lim.gpt2() {
			t.Run(fmt.Sprintf("%s/%s", dt.name, ck.name), func(t *testing.T) {
				m, cases := loadGoldenCases(t, ck.name)
				gb := newDev(t, m, Options{DType: dt.name}, goldenBlocks)
				gs := newStepper(t, gb, goldenBlocks)
				worst := 0.0
				for i, c := range cases {
					if len(c.InputIDs) > lim.maxPrompt {
						continue
					}
					rows := gs.step(part{id: kv.SeqID(i + 1), tokens: c.InputIDs, sample: true, needLogits: true})
					scale := 0.0
					for _, v := range c.Top10.Values {
						scale = max(scale, math.Abs(v))
					}
					for j, tok := range c.Top10.IDs {
						d := math.Abs(float64(rows[0].Logits[tok])-c.Top10.Values[j]) / scale
						worst = max(worst, d)
						if d > dt.rel {
							t.Errorf("%s: logit[%d] = %.6g, CPU/golden %.6g (relative error %.3g > %.0e)", c.Name, tok, rows[0].Logits[tok], c.Top10.Values[j], d, dt.rel)
						}
					}
				}
				t.Logf("max relative |device %s - golden| over top-10 logits: %.3g (tolerance %.0e)", dt.name, worst, dt.rel)
			})
		}
	}
}

// TestGPUGraphsMatchEager decodes 4 sequences for 24 steps on two float32
// backends, one replaying CUDA graphs, one eager, dropping a sequence
// halfway (so a second graph size is captured); every step's argmax and
// logits must agree.
func TestGPUGraphsMatchEager(t *testing.T) { checkGraphsMatchEager(t, newGPUOpts) }

func checkGraphsMatchEager(t *testing.T, newDev newDevice) {
	checkGraphsMatchEagerOn(t, newDev, hotFixture(t))
}

// checkGraphsMatchEagerOn is checkGraphsMatchEager on the golden
// checkpoint name's first four prompts.
func checkGraphsMatchEagerOn(t *testing.T, newDev newDevice, name string) {
	m, cases := loadGoldenCases(t, name)
	eager := newDev(t, m, Options{DType: "float32"}, goldenBlocks)
	gb := newDev(t, m, Options{DType: "float32", CUDAGraphs: true}, goldenBlocks)
	es, gs := newStepper(t, eager, goldenBlocks), newStepper(t, gb, goldenBlocks)
	const seqs = 4
	last := make([]int, seqs)
	pos := make([]int, seqs)
	for i := range seqs {
		p := part{id: kv.SeqID(i + 1), tokens: cases[i].InputIDs, sample: true, needLogits: true}
		er, gr := es.step(p), gs.step(p)
		if er[0].Argmax != gr[0].Argmax {
			t.Fatalf("prefill %d: argmax %d vs %d", i, er[0].Argmax, gr[0].Argmax)
		}
		last[i], pos[i] = er[0].Argmax, len(cases[i].InputIDs)
	}
	worst := 0.0
	for step := range 24 {
		n := seqs
		if step >= 12 {
			n = seqs - 1
		}
		var parts []part
		for i := range n {
			parts = append(parts, part{id: kv.SeqID(i + 1), tokens: []int{last[i]}, start: pos[i], sample: true, needLogits: step%3 == 0})
		}
		er, gr := es.step(parts...), gs.step(parts...)
		for i := range n {
			if er[i].Argmax != gr[i].Argmax {
				t.Fatalf("step %d seq %d: eager argmax %d, graph %d", step, i+1, er[i].Argmax, gr[i].Argmax)
			}
			if parts[i].needLogits {
				for v := range er[i].Logits {
					worst = max(worst, math.Abs(float64(er[i].Logits[v]-gr[i].Logits[v])))
				}
			}
			last[i] = er[i].Argmax
			pos[i]++
		}
	}
	if gb.graphsOff || len(gb.graphs) != 2 {
		t.Errorf("graphs off=%v, %d captured; want 2 sizes captured", gb.graphsOff, len(gb.graphs))
	}
	if worst > 1e-6 {
		t.Errorf("graph vs eager logits differ by %.3g", worst)
	}
	t.Logf("max |graph - eager| logit: %.3g", worst)
}

// compareMixed runs prompts concurrently on two backends with the same
// schedule: prefills in chunks of chunk tokens mixed with decodes of the
// sequences already past their prompt (gen tokens each, b's argmax fed
// back), alternating rows that need logits and rows that need only the
// argmax. Every step's argmax must agree; it returns the largest logit
// difference seen.
func compareMixed(t *testing.T, a, b engine.Backend, prompts [][]int, numBlocks, chunk, gen int) float64 {
	t.Helper()
	as, bs := newStepper(t, a, numBlocks), newStepper(t, b, numBlocks)
	type seqState struct {
		toks []int // prompt, then generated tokens
		done int   // tokens already in the cache
		n    int   // prompt length
	}
	st := make([]seqState, len(prompts))
	for i, p := range prompts {
		st[i] = seqState{toks: slices.Clone(p), n: len(p)}
	}
	worst := 0.0
	for step := 0; ; step++ {
		var parts []part
		var who []int
		for i := range st {
			s := &st[i]
			if len(s.toks)-s.n >= gen && s.done == len(s.toks) {
				continue // finished
			}
			end := min(s.done+chunk, len(s.toks))
			p := part{id: kv.SeqID(i + 1), tokens: s.toks[s.done:end], start: s.done, sample: end == len(s.toks)}
			p.needLogits = p.sample && (step+i)%2 == 0
			parts = append(parts, p)
			if p.sample {
				who = append(who, i)
			}
		}
		if len(parts) == 0 {
			return worst
		}
		ar, br := as.step(parts...), bs.step(parts...)
		if len(ar) != len(who) || len(br) != len(who) {
			t.Fatalf("step %d: %d and %d rows, want %d", step, len(ar), len(br), len(who))
		}
		k := 0
		for pi := range parts {
			st[parts[pi].id-1].done = parts[pi].start + len(parts[pi].tokens)
			if !parts[pi].sample {
				continue
			}
			i := who[k]
			x, y := ar[k], br[k]
			k++
			if x.Argmax != y.Argmax {
				t.Errorf("step %d seq %d: argmax %d vs %d", step, i+1, x.Argmax, y.Argmax)
			}
			if parts[pi].needLogits {
				if x.Logits == nil || y.Logits == nil {
					t.Fatalf("step %d seq %d: no logits", step, i+1)
				}
				for v := range y.Logits {
					worst = max(worst, math.Abs(float64(x.Logits[v]-y.Logits[v])))
				}
			} else if x.Logits != nil {
				t.Errorf("step %d seq %d: logits returned for a row that needs only the argmax", step, i+1)
			}
			if len(st[i].toks) == st[i].done && len(st[i].toks)-st[i].n < gen {
				st[i].toks = append(st[i].toks, y.Argmax)
			}
		}
	}
}
