package cpu

import (
	"encoding/json"
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

// goldenFile is a checkpoint's golden.json (see testdata/gpt2-tiny/README.md).
type goldenFile struct {
	Cases []goldenCase `json:"cases"`
}

type idValues struct {
	IDs    []int     `json:"ids"`
	Values []float64 `json:"values"`
}

type logitStats struct {
	Count  int     `json:"count"`
	Sum    float64 `json:"sum"`
	SumAbs float64 `json:"sum_abs"`
	SumSq  float64 `json:"sum_sq"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Argmin int     `json:"argmin"`
	Argmax int     `json:"argmax"`
}

type goldenCase struct {
	Name          string     `json:"name"`
	InputIDs      []int      `json:"input_ids"`
	Top10         idValues   `json:"last_logits_top10"`
	Probe         idValues   `json:"last_logits_probe"`
	LastStats     logitStats `json:"last_logits_stats"`
	AllStats      logitStats `json:"all_logits_stats"`
	PositionStats struct {
		Sum    []float64 `json:"sum"`
		Max    []float64 `json:"max"`
		Argmax []int     `json:"argmax"`
		Margin []float64 `json:"margin"`
	} `json:"position_stats"`
	Hidden struct {
		Embed  []float64   `json:"embed"`
		Blocks [][]float64 `json:"blocks"`
		LnF    []float64   `json:"ln_f"`
		// FinalNorm is the Llama family's name for LnF.
		FinalNorm []float64 `json:"final_norm"`
	} `json:"hidden_last"`
	Greedy struct {
		Tokens       []int     `json:"tokens"`
		ChosenLogits []float64 `json:"chosen_logits"`
		// Margins are each step's top-1 minus top-2 logit (Llama-family
		// goldens): from a step under the tolerance on, float32 may take
		// the runner-up.
		Margins []float64 `json:"margins"`
	} `json:"greedy"`
}

// checkpoint is one golden fixture with the tolerances its README suggests.
type checkpoint struct {
	name string
	tol  float64 // absolute, on logits and hidden vectors
	// allStats is the prompt whose all-position statistics are compared
	// (once per checkpoint: the LM head over every position is the
	// costliest part of these tests).
	allStats string
}

// checkpoints are the golden fixtures. gpt2-tiny's README suggests 1e-5
// (25x the observed float32 noise), gpt2-tiny-hot's 5e-5. The Llama-family
// ones (testdata/{qwen2,llama,qwen3}-tiny: random bfloat16 checkpoints with
// real vocabularies, GQA, Llama 3 rope scaling, Qwen2's biases and Qwen3's
// q/k norms and explicit head_dim) give 1e-4 for float32 compute with
// float64 rotary angles, and list the near-ties in their top-10s.
var checkpoints = []checkpoint{
	{"gpt2-tiny", 1e-5, "len128"}, {"gpt2-tiny-hot", 5e-5, "len128"},
	{"qwen2-tiny", 1e-4, "len100"}, {"llama-tiny", 1e-4, "len100"}, {"qwen3-tiny", 1e-4, "len100"},
}

// raceMaxPrompt is the longest prompt the goldens run under the race
// detector, which slows the forward about twentyfold: GPT-2's 1,009-token
// prompt runs, the Llama family's 2,100-token one does not.
const raceMaxPrompt = 1100

// finalNorm is the hidden vector after the final norm: ln_f in GPT-2's
// goldens, final_norm in the Llama family's.
func (c *goldenCase) finalNorm() []float64 {
	if c.Hidden.LnF != nil {
		return c.Hidden.LnF
	}
	return c.Hidden.FinalNorm
}

// blocksFor is a pool that holds every prompt of g with its greedy
// continuation at once, in blocks of 16 tokens.
func blocksFor(g *goldenFile) int {
	n := 0
	for _, c := range g.Cases {
		n += (len(c.InputIDs) + len(c.Greedy.Tokens) + 15) / 16
	}
	return n
}

// statsRel is the README's relative tolerance on the *_stats sums.
const statsRel = 1e-6

func loadGolden(t testing.TB, name string) (*model.Model, *goldenFile) {
	t.Helper()
	dir := filepath.Join(fixtures, name)
	m, err := model.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	data, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g goldenFile
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Cases) < 6 {
		t.Fatalf("%s: %d golden cases, want at least 6", name, len(g.Cases))
	}
	return m, &g
}

// harness drives a CPUBackend directly, the way the engine does: a kv.Manager
// hands out block ids and each step is a hand-built engine.Batch.
type harness struct {
	t  testing.TB
	b  *Backend
	kv *kv.Manager
	// allRows asks for the logits of every position of every part
	// (SeqBatch.PromptLogits), so tests can read them all.
	allRows bool
}

func newHarness(t testing.TB, m *model.Model, numBlocks, blockSize int, opts Options) *harness {
	t.Helper()
	b, err := New(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	mgr, err := kv.New(numBlocks, blockSize)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.AllocateKV(numBlocks, blockSize); err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, b: b, kv: mgr}
}

// part is one sequence's share of a step.
type part struct {
	id     kv.SeqID
	tokens []int
	start  int
	sample bool
}

// step allocates blocks for every part and runs one Forward. The returned
// rows are copied so that they survive the next step.
func (h *harness) step(parts ...part) []engine.SampleRow {
	h.t.Helper()
	batch := &engine.Batch{}
	for _, p := range parts {
		ok, err := h.kv.Allocate(p.id, p.start+len(p.tokens))
		if err != nil || !ok {
			h.t.Fatalf("allocate seq %d: ok=%v err=%v", p.id, ok, err)
		}
		batch.Seqs = append(batch.Seqs, engine.SeqBatch{
			ID: p.id, Tokens: p.tokens, StartPos: p.start,
			BlockTable: h.kv.BlockTable(p.id), Sample: p.sample, NeedLogits: p.sample, PromptLogits: h.allRows,
		})
		batch.NumTokens += len(p.tokens)
	}
	rows, err := h.b.Forward(batch)
	if err != nil {
		h.t.Fatal(err)
	}
	out := make([]engine.SampleRow, len(rows))
	for i, r := range rows {
		out[i] = engine.SampleRow{Logits: slices.Clone(r.Logits), Argmax: r.Argmax}
	}
	return out
}

// maxDiff returns the largest |got[i] - want[i]| and its index.
func maxDiff(got []float32, want []float64) (float64, int) {
	worst, at := 0.0, -1
	for i := range want {
		if d := math.Abs(float64(got[i]) - want[i]); d > worst || math.IsNaN(d) {
			worst, at = d, i
		}
	}
	return worst, at
}

// diffTracker records the largest error seen per quantity, logged at the
// end of a test so the margin to each tolerance is visible.
type diffTracker map[string]float64

func (d diffTracker) note(what string, v float64) {
	if v > d[what] {
		d[what] = v
	}
}

func (d diffTracker) log(t testing.TB) {
	t.Helper()
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		t.Logf("max error %-22s %.3g", k, d[k])
	}
}

// checkVec fails the test when got and want differ by more than tol.
func checkVec(t testing.TB, d diffTracker, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) < len(want) {
		t.Fatalf("%s: got %d values, want %d", what, len(got), len(want))
	}
	worst, at := maxDiff(got, want)
	d.note(what, worst)
	if worst > tol {
		t.Errorf("%s: max |diff| %.3g at %d (got %v, want %v) exceeds %.3g", what, worst, at, got[at], want[at], tol)
	}
}

// top10 returns the 10 largest logits' ids, value-descending, ties by the
// lowest id, as the golden orders them.
func top10(logits []float32) []int {
	ids := make([]int, 0, 11)
	for i, v := range logits {
		if len(ids) == 10 && v <= logits[ids[9]] {
			continue
		}
		j := len(ids)
		ids = append(ids, i)
		for j > 0 && logits[ids[j-1]] < v {
			ids[j] = ids[j-1]
			j--
		}
		ids[j] = i
		if len(ids) > 10 {
			ids = ids[:10]
		}
	}
	return ids
}

// checkLast compares a last-position logits row with the golden's top-10
// (ids exact, except that two neighbours whose golden values differ by less
// than tol may come in either order, as the READMEs allow), their values
// within tol, the probe logits and the last-row statistics.
func checkLast(t testing.TB, d diffTracker, c *goldenCase, logits []float32, tol float64) {
	t.Helper()
	got := top10(logits)
	want := c.Top10.IDs
	for i := 0; i < len(want); i++ {
		if got[i] == want[i] {
			continue
		}
		swapped := i+1 < len(want) && got[i] == want[i+1] && got[i+1] == want[i] &&
			math.Abs(c.Top10.Values[i]-c.Top10.Values[i+1]) < tol
		if !swapped {
			t.Errorf("%s: top-10 ids %v, want %v", c.Name, got, want)
			break
		}
		i++
	}
	vals := make([]float32, len(want))
	for i, id := range want {
		vals[i] = logits[id]
	}
	checkVec(t, d, "top10 values", vals, c.Top10.Values, tol)
	probe := make([]float32, len(c.Probe.IDs))
	for i, id := range c.Probe.IDs {
		probe[i] = logits[id]
	}
	checkVec(t, d, "probe logits", probe, c.Probe.Values, tol)
	var st statsAcc
	st.add(logits, 0)
	st.check(t, d, c.Name+" last_logits_stats", c.LastStats, tol)
}

// statsAcc accumulates golden-style statistics in float64 over logit rows.
type statsAcc struct {
	count              int
	sum, sumAbs, sumSq float64
	min, max           float64
	argmin, argmax     int
}

// add folds one row whose first element has flat index base.
func (s *statsAcc) add(row []float32, base int) {
	if s.count == 0 {
		s.min, s.max = math.Inf(1), math.Inf(-1)
	}
	for i, v32 := range row {
		v := float64(v32)
		s.sum += v
		s.sumAbs += math.Abs(v)
		s.sumSq += v * v
		if v < s.min {
			s.min, s.argmin = v, base+i
		}
		if v > s.max {
			s.max, s.argmax = v, base+i
		}
	}
	s.count += len(row)
}

// check compares with the golden: sums within statsRel relative to the sum
// of absolute values (the sum itself can be near zero), min and max within
// tol, and argmin/argmax exactly.
func (s *statsAcc) check(t testing.TB, d diffTracker, what string, want logitStats, tol float64) {
	t.Helper()
	if s.count != want.Count {
		t.Fatalf("%s: count %d, want %d", what, s.count, want.Count)
	}
	for _, q := range []struct {
		name             string
		got, want, scale float64
	}{
		{"sum", s.sum, want.Sum, want.SumAbs},
		{"sum_abs", s.sumAbs, want.SumAbs, want.SumAbs},
		{"sum_sq", s.sumSq, want.SumSq, want.SumSq},
	} {
		rel := math.Abs(q.got-q.want) / math.Abs(q.scale)
		d.note("stats "+q.name+" (rel)", rel)
		if rel > statsRel || math.IsNaN(rel) {
			t.Errorf("%s: %s = %.9g, want %.9g (relative error %.3g > %.3g)", what, q.name, q.got, q.want, rel, statsRel)
		}
	}
	if math.Abs(s.min-want.Min) > tol || math.Abs(s.max-want.Max) > tol {
		t.Errorf("%s: min/max %.7g/%.7g, want %.7g/%.7g", what, s.min, s.max, want.Min, want.Max)
	}
	if s.argmin != want.Argmin || s.argmax != want.Argmax {
		t.Errorf("%s: argmin/argmax %d/%d, want %d/%d", what, s.argmin, s.argmax, want.Argmin, want.Argmax)
	}
}
