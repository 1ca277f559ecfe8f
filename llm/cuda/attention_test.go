package cuda

// Tests of the prefill and decode attention kernels (flash_prefill,
// attention_split, attention_combine) against the original attention
// kernel and the CPU backend, on the host emulator.

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/kv"
)

// TestEmuAttentionKernels runs the CUDA C of flash_prefill and
// attention_split/attention_combine on one step's rows — prefill chunks
// of 37, 16 (continuing at position 300, its prefix in the cache), 5
// (straddling position 256) and 2 rows, decodes at positions 511, 256,
// 255 and 3 — with random queries and a random paged cache, and compares
// them with the original attention kernel over the same rows: flash tiles
// and splits within the storage type's rounding, the unsplit decode rows
// and a decode split into one non-empty split exactly. Every kernel also
// runs its threads in reverse order, bit-identical. Head sizes 8, 16, 36
// (element-by-element loads in half types), 64 and 128, grouped-query
// heads, every storage type.
func TestEmuAttentionKernels(t *testing.T) {
	e := loadEmu(t)
	type shape struct {
		D, H, KVH int
		dt        string
	}
	shapes := []shape{{8, 4, 2, "float32"}, {16, 2, 1, "float16"}, {36, 2, 1, "float16"}, {64, 4, 1, "bfloat16"}, {128, 2, 2, "float32"}, {128, 4, 2, "float16"}}
	if raceEnabled {
		shapes = shapes[:2]
	}
	for _, sh := range shapes {
		t.Run(fmt.Sprintf("D=%d,H=%d,KVH=%d,%s", sh.D, sh.H, sh.KVH, sh.dt), func(t *testing.T) {
			checkAttentionKernels(t, e, sh.D, sh.H, sh.KVH, sh.dt)
		})
	}
}

func checkAttentionKernels(t *testing.T, e *cudaEmu, D, H, KVH int, dtName string) {
	dt, err := parseDType(dtName)
	if err != nil {
		t.Fatal(err)
	}
	const bs, perSeq = 16, 33 // blocks of 16, 33 blocks a sequence (528 positions)
	type seqSpec struct{ start, n int }
	specs := []seqSpec{{0, 37}, {511, 1}, {300, 16}, {256, 1}, {250, 5}, {255, 1}, {3, 1}, {40, 2}}
	numBlocks := len(specs) * perSeq
	r := rand.New(rand.NewPCG(3, uint64(D)))
	perm := r.Perm(numBlocks)
	batch := &engine.Batch{}
	for i, s := range specs {
		tbl := make([]int32, perSeq)
		for k := range tbl {
			tbl[k] = int32(perm[i*perSeq+k])
		}
		batch.Seqs = append(batch.Seqs, engine.SeqBatch{ID: kv.SeqID(i + 1), Tokens: make([]int, s.n), StartPos: s.start, BlockTable: tbl, Sample: true})
		batch.NumTokens += s.n
	}
	var m batchMeta
	buf, err := packBatch(nil, &m, batch, metaLimits{vocab: 10, nPositions: perSeq * bs, numBlocks: numBlocks, blockSize: bs}, stepPad{})
	if err != nil {
		t.Fatal(err)
	}
	g := newFakeGPU(t)
	g.emu = e
	QD, KVD, N := H*D, KVH*D, m.N
	meta := g.alloc(len(buf) * 4)
	for i, v := range buf {
		g.setI32(meta, i, int(v))
	}
	q := g.alloc(N * QD * 4)
	for i := range N * QD {
		g.setF32(q, i, float32(r.NormFloat64()))
	}
	kc, vc := g.alloc(numBlocks*bs*KVD*dt.size), g.alloc(numBlocks*bs*KVD*dt.size)
	for i := range numBlocks * bs * KVD {
		g.setElem(kc, i, dt.blas, float32(r.NormFloat64()))
		g.setElem(vc, i, dt.blas, float32(r.NormFloat64()))
	}
	part := g.alloc(splitPartBytes(D))
	i32 := DevicePtr(4)
	pos, seq, bt := meta+i32*DevicePtr(m.OffPos), meta+i32*DevicePtr(m.OffSeq), meta+i32*DevicePtr(m.OffBlocks)
	tiles, dec := meta+i32*DevicePtr(m.OffTiles), meta+i32*DevicePtr(m.OffDec)
	scale := float32(1 / math.Sqrt(float64(D)))
	group := H / KVH
	T := attentionThreads(D)
	sfx := dt.suffix
	read := func(out DevicePtr) []float32 {
		v := make([]float32, N*QD)
		for i := range v {
			v[i] = g.elem(out, i, dt.blas)
		}
		return v
	}
	// both runs a launch in forward and in reverse thread order, which
	// must agree bit for bit, and returns the result.
	both := func(out DevicePtr, launch func(rev bool)) []float32 {
		launch(false)
		fwd := read(out)
		launch(true)
		rev := read(out)
		for i := range fwd {
			if math.Float32bits(fwd[i]) != math.Float32bits(rev[i]) && !(fwd[i] != fwd[i] && rev[i] != rev[i]) {
				t.Fatalf("element %d: %g in forward thread order, %g in reverse", i, fwd[i], rev[i])
			}
		}
		return fwd
	}
	ptrs := func(vs ...DevicePtr) []uint64 {
		out := make([]uint64, len(vs))
		for i, v := range vs {
			out[i] = uint64(v)
		}
		return out
	}
	ints := func(vs ...int) []uint64 {
		out := make([]uint64, len(vs))
		for i, v := range vs {
			out[i] = uint64(uint32(int32(v)))
		}
		return out
	}
	f32 := func(v float32) uint64 { return uint64(math.Float32bits(v)) }
	launch := func(name string, grid, block [3]uint32, shared int, args []uint64, rev bool) {
		t.Helper()
		if err := e.launch(name+sfx, grid, block, uint32(shared), args, rev); err != nil {
			t.Fatal(err)
		}
	}
	attBlock := [3]uint32{uint32(T), 1, 1}
	attShared := attentionShared(D, dt.size)
	// The original kernel over every row.
	outOld := g.alloc(N * QD * dt.size)
	old := both(outOld, func(rev bool) {
		args := append(ptrs(outOld, q, kc, vc, pos, seq, bt), ints(m.MaxBlocks, bs, QD, KVD, D, group)...)
		launch("attention", [3]uint32{uint32(N), uint32(H), 1}, attBlock, attShared, append(args, f32(scale)), rev)
	})
	tol := map[string]float64{"float32": 2e-6, "float16": 2e-3, "bfloat16": 1.6e-2}[dtName]
	compare := func(what string, got []float32, rows []int, exact bool) {
		t.Helper()
		worst := 0.0
		for _, i := range rows {
			for c := range QD {
				a, b := got[i*QD+c], old[i*QD+c]
				d := math.Abs(float64(a - b))
				if a != a {
					d = math.Inf(1)
				}
				if exact && math.Float32bits(a) != math.Float32bits(b) || d > tol {
					t.Fatalf("%s: row %d element %d: %g, the original kernel %g", what, i, c, a, b)
				}
				worst = max(worst, d)
			}
		}
		t.Logf("%s: max |new - original| %.3g over %d rows", what, worst, len(rows))
	}
	var tileRows, decRows []int
	for k := range m.Tiles {
		for i := range buf[m.OffTiles+2*k+1] {
			tileRows = append(tileRows, int(buf[m.OffTiles+2*k])+int(i))
		}
	}
	for k := range m.Dec {
		decRows = append(decRows, int(buf[m.OffDec+k]))
	}
	if len(tileRows)+len(decRows) != N || m.Tiles != 6 || m.TilesCap != (N+15)/16+len(specs) {
		t.Fatalf("tiles %d of %d cover %d rows, %d decode rows, of %d", m.Tiles, m.TilesCap, len(tileRows), len(decRows), N)
	}
	if flashHeadDim(D) {
		outFlash := g.alloc(N * QD * dt.size)
		got := both(outFlash, func(rev bool) {
			args := append(ptrs(outFlash, q, kc, vc, pos, seq, bt, tiles), ints(m.MaxBlocks, bs, QD, KVD, D, group)...)
			launch("flash_prefill", [3]uint32{uint32(m.TilesCap), uint32(H), 1}, [3]uint32{flashThreads, 1, 1}, flashShared(D), append(args, f32(scale)), rev)
		})
		compare("flash_prefill", got, tileRows, false)
		for _, i := range decRows { // rows outside the tiles are not written
			if v := got[i*QD]; v == v && dt.size == 4 {
				t.Fatalf("flash_prefill wrote row %d, a decode row", i)
			}
		}
	}
	// The decode rows: unsplit (exactly the original), then split in 256
	// positions (511: two full splits; 256: a full one and one position;
	// 255 and 3: one split and empty ones), with a third split empty for
	// every row.
	for _, splits := range []int{1, 2, 3} {
		splitLen := 512
		if splits > 1 {
			splitLen = 256
		}
		if splitLen%T != 0 {
			t.Fatalf("split of %d positions for a tile of %d", splitLen, T)
		}
		outSplit := g.alloc(N * QD * dt.size)
		got := both(outSplit, func(rev bool) {
			args := append(ptrs(outSplit, part, q, kc, vc, pos, seq, bt, dec), ints(m.MaxBlocks, bs, QD, KVD, D, group)...)
			args = append(append(args, f32(scale)), ints(splitLen)...)
			launch("attention_split", [3]uint32{uint32(len(decRows)), uint32(H), uint32(splits)}, attBlock, attShared, args, rev)
			if splits > 1 {
				launch("attention_combine", [3]uint32{uint32(len(decRows)), uint32(H), 1}, [3]uint32{uint32(min((D+31)/32*32, 256)), 1, 1}, 0,
					append(ptrs(outSplit, part, dec), ints(QD, D, splits)...), rev)
			}
		})
		compare(fmt.Sprintf("attention_split, %d splits", splits), got, decRows, false)
		// Rows whose context is one non-empty split equal the original bit for bit.
		var single []int
		for _, i := range decRows {
			if splits == 1 || g.i32(pos, i) < 256 {
				single = append(single, i)
			}
		}
		compare(fmt.Sprintf("attention_split, %d splits, one non-empty", splits), got, single, true)
	}
}

// TestAttentionSplits: the split count fills about splitTargetBlocks
// blocks, never splits below splitMinPositions, cuts in whole tiles and
// covers the context.
func TestAttentionSplits(t *testing.T) {
	for _, c := range []struct{ n, heads, ctx, splits, splitLen int }{
		{4, 14, 256, 1, 256},     // short: one split
		{4, 14, 1023, 1, 1024},   // under two splits' minimum
		{4, 14, 1024, 2, 512},    // two of the minimum
		{4, 14, 32768, 5, 6656},  // 56 blocks: 5 splits give 280
		{1, 14, 32768, 19, 1792}, // batch 1: 19 splits
		{1, 2, 1 << 20, 32, 32768},
		{64, 14, 32768, 1, 32768}, // 896 blocks already
		{4, 12, 4000, 6, 768},     // GPT-2: 48 blocks, 6 splits
	} {
		s, l := attentionSplits(c.n, c.heads, c.ctx, 256)
		if s != c.splits || l != c.splitLen || (s > 1 && (l%256 != 0 || s*l < c.ctx || (s-1)*l >= c.ctx || c.n*c.heads*s >= 2*splitTargetBlocks)) {
			t.Errorf("attentionSplits(%d, %d, %d) = %d, %d; want %d, %d", c.n, c.heads, c.ctx, s, l, c.splits, c.splitLen)
		}
	}
}

// emuAttentionModels are the checkpoints the attention tests run: GPT-2
// and the three grouped-query ones.
var emuAttentionModels = []string{"gpt2-tiny", "qwen2-tiny", "llama-tiny", "qwen3-tiny"}

// TestEmuFlashPrefillMatchesCPU: on each checkpoint, several sequences
// prefilled in chunks of 7, 16 and 37 tokens (chunks continuing a
// sequence whose prefix is in the cache, chunks shorter than a tile and
// not multiples of it), mixed with decodes, give the CPU backend's argmax
// and its float32 logits within 2e-5, and the original attention kernel's.
func TestEmuFlashPrefillMatchesCPU(t *testing.T) {
	if raceEnabled {
		t.Skip("arithmetic, not concurrency: runs without the race detector (TestEmuAttentionKernels runs under it)")
	}
	for _, name := range emuAttentionModels {
		for _, chunk := range []int{7, 16, 37} {
			t.Run(fmt.Sprintf("%s/chunk%d", name, chunk), func(t *testing.T) {
				m, _ := loadGoldenCases(t, name)
				const blocks = 64
				prompts := smallPrompts(m.Config.VocabSize, 70, 1, 33, 16, 5, 120)
				g := newFakeGPU(t)
				g.emu = loadEmu(t)
				emu := fakeBackendOn(t, g, m, Options{DType: "float32"}, blocks)
				worst := compareMixed(t, emu, cpuBackend(t, m, blocks), prompts, blocks, chunk, 4)
				if g.byName["flash_prefill_f32"] == 0 {
					t.Fatalf("flash_prefill never ran: %v", g.byName)
				}
				oldB := newEmuBackend(t, m, Options{DType: "float32"}, blocks)
				oldB.oldAttention = true
				g2 := newFakeGPU(t)
				g2.emu = loadEmu(t)
				emu2 := fakeBackendOn(t, g2, m, Options{DType: "float32"}, blocks)
				worstOld := compareMixed(t, emu2, oldB, prompts, blocks, chunk, 4)
				if worst > 2e-5 || worstOld > 2e-5 {
					t.Errorf("logits differ from the CPU backend's by %.3g, from the original kernel's by %.3g (tolerance 2e-5)", worst, worstOld)
				}
				t.Logf("max |logit - CPU| %.3g, |logit - original kernel| %.3g", worst, worstOld)
			})
		}
	}
}

// TestEmuSplitDecodeMatchesCPU: with splits of 256 positions allowed,
// decodes whose contexts cross 256 and 512 (one, two, then three or four
// splits, some empty) give the CPU backend's argmax and logits within
// 2e-5 and the original kernel's; with CUDA graphs the replays equal the
// eager steps bit for bit, through graph keys of stride 16, 32 and 64.
func TestEmuSplitDecodeMatchesCPU(t *testing.T) {
	if raceEnabled {
		t.Skip("arithmetic, not concurrency: runs without the race detector")
	}
	defer func(v int) { splitMinPositions = v }(splitMinPositions)
	splitMinPositions = 256
	for _, name := range []string{"gpt2-tiny", "qwen3-tiny"} {
		t.Run(name, func(t *testing.T) {
			m, _ := loadGoldenCases(t, name)
			const blocks = 160
			prompts := smallPrompts(m.Config.VocabSize, 250, 505, 20)
			ge := newFakeGPU(t)
			ge.emu = loadEmu(t)
			eager := fakeBackendOn(t, ge, m, Options{DType: "float32"}, blocks)
			gg := newFakeGPU(t)
			gg.emu = loadEmu(t)
			graphs := fakeBackendOn(t, gg, m, Options{DType: "float32", CUDAGraphs: true}, blocks)
			old := newEmuBackend(t, m, Options{DType: "float32"}, blocks)
			old.oldAttention = true
			cb := cpuBackend(t, m, blocks)
			backends := []engine.Backend{eager, graphs, old, cb}
			steppers := make([]*stepper, len(backends))
			for k, b := range backends {
				steppers[k] = newStepper(t, b, blocks)
			}
			last := make([]int, len(prompts))
			pos := make([]int, len(prompts))
			for i, p := range prompts {
				var ref []engine.SampleRow
				for k, s := range steppers {
					rows := s.step(part{id: kv.SeqID(i + 1), tokens: p, sample: true})
					if k == 0 {
						ref = rows
					} else if rows[0].Argmax != ref[0].Argmax {
						t.Fatalf("prefill %d: argmax %d vs %d (backend %d)", i, rows[0].Argmax, ref[0].Argmax, k)
					}
				}
				last[i], pos[i] = ref[0].Argmax, len(p)
			}
			worst := make([]float64, len(backends))
			// decodeStep decodes one token of every prompt's sequence on
			// every backend, beside extra (a prompt chunk, or nothing), and
			// compares each backend's rows with the eager split step's.
			decodeStep := func(label string, extra ...part) {
				var parts []part
				for i := range prompts {
					parts = append(parts, part{id: kv.SeqID(i + 1), tokens: []int{last[i]}, start: pos[i], sample: true, needLogits: true})
				}
				parts = append(parts, extra...)
				res := make([][]engine.SampleRow, len(backends))
				for k, s := range steppers {
					res[k] = s.step(parts...)
				}
				for i := range prompts {
					for k := 1; k < len(backends); k++ {
						if res[k][i].Argmax != res[0][i].Argmax {
							t.Fatalf("%s seq %d (position %d): argmax %d, eager split %d (backend %d)", label, i, pos[i], res[k][i].Argmax, res[0][i].Argmax, k)
						}
						for v := range res[0][i].Logits {
							worst[k] = max(worst[k], math.Abs(float64(res[k][i].Logits[v]-res[0][i].Logits[v])))
						}
					}
					last[i] = res[0][i].Argmax
					pos[i]++
				}
			}
			for step := range 16 {
				decodeStep(fmt.Sprintf("step %d", step))
			}
			// Mixed steps: the decodes beside a new 20-token prompt chunk
			// (unsampled), three times with one padded graph key (24 rows,
			// 4 sampled rows): eager, captured, replayed, the decodes
			// split, flash_prefill over every tile slot.
			for step := range 3 {
				decodeStep(fmt.Sprintf("mixed step %d", step), part{id: kv.SeqID(10 + step), tokens: smallPrompts(m.Config.VocabSize, 20)[0]})
			}
			padded := 0
			for k := range graphs.graphs {
				if k.padded {
					padded++
				}
			}
			if padded == 0 {
				t.Errorf("no padded graph captured: %v", slices.Collect(maps.Keys(graphs.graphs)))
			}
			if ge.byName["attention_combine_f32"] == 0 || gg.byName["attention_combine_f32"] == 0 {
				t.Fatalf("no split ran: %v", ge.byName)
			}
			if graphs.graphsOff || len(graphs.graphs) < 2 {
				t.Errorf("graphs off=%v, %d captured; want the strides 32 and 64 captured", graphs.graphsOff, len(graphs.graphs))
			}
			if worst[1] != 0 || worst[2] > 2e-5 || worst[3] > 2e-5 {
				t.Errorf("max |logit difference| from the eager split steps: graphs %.3g (want 0), original kernel %.3g, CPU %.3g (tolerance 2e-5)", worst[1], worst[2], worst[3])
			}
			t.Logf("max |logit difference| from the eager split steps: graphs %.3g, original kernel %.3g, CPU %.3g; combines %d eager", worst[1], worst[2], worst[3], ge.byName["attention_combine_f32"])
		})
	}
}
