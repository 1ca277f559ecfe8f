package cuda

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/model"
)

// Launch shapes. 256 threads suit rows of 64..1024 elements; the argmax
// kernel's shared arrays are sized for at most 1024.
const (
	rowThreads    = 256
	argmaxThreads = 1024
	ewBlocksMax   = 4096
)

// grow makes the per-step buffers hold rows token rows, sample sampled rows
// and metaLen int32s of metadata. Growing synchronises and reallocates;
// after the first few steps it never happens.
func (b *Backend) grow(rows, sample, metaLen int) error {
	c := b.cfg
	b.maxStepRows = max(b.maxStepRows, rows)
	C, V, I := c.Hidden, c.VocabSize, c.Intermediate
	QD, KVD := c.QDim(), c.KVDim()
	up := I // the MLP input projection's outputs: [gate | up] when gated
	if c.MLP == model.MLPGated {
		up = 2 * I
	}
	if rows > b.capRows || sample > b.capSample || metaLen > b.capMeta {
		// Graphs hold the old addresses.
		b.dropGraphs()
	}
	if rows > b.capRows {
		rows = max(rows, 2*b.capRows, 64)
		if err := b.drv.StreamSync(b.stream); err != nil {
			return err
		}
		b.drv.MemFree(b.acts)
		b.acts = 0
		sz := b.dt.size
		parts := []struct {
			p     *DevicePtr
			bytes int
		}{
			{&b.x, rows * C * 4}, {&b.h, rows * C * sz}, {&b.q, rows * QD * 4}, {&b.att, rows * QD * sz},
			{&b.gemm, rows * max(QD+2*KVD, up, C) * 4}, {&b.act, rows * I * sz},
			{&b.split, splitPartBytes(c.HeadDim)},
		}
		total := 0
		for _, p := range parts {
			total += align(p.bytes, 256)
		}
		base, err := b.drv.MemAlloc(total)
		if err != nil {
			b.capRows = 0
			return fmt.Errorf("cuda: step buffers for %d tokens (%d MiB): %w", rows, total>>20, err)
		}
		b.acts = base
		off := 0
		for _, p := range parts {
			*p.p = base + DevicePtr(off)
			off += align(p.bytes, 256)
		}
		b.capRows = rows
	}
	if sample > b.capSample {
		// Doubling spares the decode batches that grow a sequence at a time
		// a reallocation each, but never past the most token rows a step
		// has had (at most the step budget): a step with prompt logits has
		// a result row per token, and these buffers (device and page-locked
		// host) are kept.
		sample = max(sample, min(max(2*b.capSample, 8), b.maxStepRows))
		if err := b.drv.StreamSync(b.stream); err != nil {
			return err
		}
		b.drv.MemFree(b.res)
		b.drv.MemFree(b.hs)
		b.drv.MemFreeHost(b.resHost)
		b.res, b.hs, b.resHost, b.capSample = 0, 0, nil, 0
		var err error
		if b.hs, err = b.drv.MemAlloc(sample * C * b.dt.size); err != nil {
			return err
		}
		b.resLogitsOff = align(sample*4, 256)
		b.resHostBytes = b.resLogitsOff + sample*V*4
		if b.res, err = b.drv.MemAlloc(b.resHostBytes); err != nil {
			return fmt.Errorf("cuda: logits for %d rows: %w", sample, err)
		}
		if b.resHost, err = b.drv.MemAllocHost(b.resHostBytes); err != nil {
			return err
		}
		b.capSample = sample
	}
	if metaLen > b.capMeta {
		metaLen = max(metaLen, 2*b.capMeta, 1024)
		if err := b.drv.StreamSync(b.stream); err != nil {
			return err
		}
		b.drv.MemFree(b.meta)
		b.drv.MemFreeHost(b.metaHost)
		b.meta, b.metaHost, b.capMeta = 0, nil, 0
		var err error
		if b.meta, err = b.drv.MemAlloc(metaLen * 4); err != nil {
			return err
		}
		if b.metaHost, err = b.drv.MemAllocHost(metaLen * 4); err != nil {
			return err
		}
		b.capMeta = metaLen
	}
	return nil
}

// ReturnsPromptLogits implements engine.PromptLogitsBackend: every row of
// a sequence with PromptLogits goes through the LM head and comes back.
// The results buffers (device and page-locked host memory, each the rows
// times the vocabulary in float32) grow to the largest such step and are
// kept: at most the step budget's rows, 411 MB each for GPT-2 at 2048.
func (b *Backend) ReturnsPromptLogits() bool { return true }

// Forward implements engine.Backend. Every returned row has Argmax set
// (ties to the lowest id); Logits is set only for rows whose NeedLogits
// asked for it, and for every row of a sequence with PromptLogits. Rows and
// logits (page-locked host memory) are reused by the next call.
func (b *Backend) Forward(batch *engine.Batch) ([]engine.SampleRow, error) {
	done, err := b.enter()
	defer done()
	if err != nil {
		return nil, err
	}
	if b.kc == 0 {
		return nil, errors.New("cuda: Forward before AllocateKV")
	}
	lim := metaLimits{vocab: b.cfg.VocabSize, nPositions: b.cfg.MaxPositions, numBlocks: b.numBlocks, blockSize: b.blockSize}
	// A step that may use a CUDA graph is packed to its graph's shape
	// (graph.go): the token rows, the sampled rows and the block tables'
	// stride, so that every launch parameter is the same for every step of
	// that shape.
	key, graph := b.graphShape(batch)
	var pad stepPad
	if graph {
		pad = stepPad{rows: key.rows, sample: key.sample, stride: key.stride, padded: key.padded}
	}
	if b.packed, err = packBatch(b.packed, &b.bm, batch, lim, pad); err != nil {
		return nil, err
	}
	m := &b.bm
	// Decode rows' context splits are cut from a bound that depends only
	// on the graph stride of the step's longest table, whether or not it
	// runs from a graph, so that a graph and an eager step split alike and
	// agree bit for bit.
	m.SplitCtx = graphStride(m.Need, (b.cfg.MaxPositions+b.blockSize-1)/b.blockSize) * b.blockSize
	// And their number from the decode rows' bound of the step's shape: a
	// padded graph launches its padded rows' worth, so an eager step of
	// that shape counts them too.
	m.SplitRows = 0
	if shape, ok := b.stepShape(batch); ok && shape.padded {
		m.SplitRows = shape.rows
	}
	if m.N == 0 {
		return b.rows[:0], nil
	}
	if err := b.grow(m.NP, m.RP, m.Len); err != nil {
		return nil, err
	}
	if err := b.enqueueStep(m, graph); err != nil {
		// Work queued before the failure may still be reading the
		// page-locked metadata and writing the KV cache: let it finish
		// before the next step rewrites them.
		_ = b.drv.StreamSync(b.stream)
		return nil, b.profiledFailure(err)
	}
	if err := b.drv.StreamSync(b.stream); err != nil {
		return nil, b.profiledFailure(err)
	}
	return b.results(m), nil
}

// profiledFailure tells the profiler, when there is one, that the step
// failed, so that it is not counted; it returns err.
func (b *Backend) profiledFailure(err error) error {
	if b.prof != nil {
		b.prof.fail(err)
	}
	return err
}

// enqueueStep queues a packed step on the stream: the metadata copy, the
// forward pass (graph or eager launches) and the copy of the results back.
func (b *Backend) enqueueStep(m *batchMeta, graph bool) error {
	copy(unsafe.Slice((*int32)(b.metaHost), m.Len), b.packed)
	if err := b.drv.CopyHtoD(b.meta, b.metaHost, m.Len*4, b.stream); err != nil {
		return err
	}
	var err error
	if graph {
		err = b.forwardGraph(m)
	} else {
		err = b.forwardDevice(m)
	}
	if err != nil {
		return err
	}
	if m.R == 0 {
		return nil
	}
	n := m.R * 4
	if m.L > 0 {
		n = b.resLogitsOff + m.L*b.cfg.VocabSize*4
	}
	return b.drv.CopyDtoH(b.resHost, b.res, n, b.stream)
}

// results turns the copied-back buffer into the engine's rows, in batch
// order (the device computed them need-logits first).
func (b *Backend) results(m *batchMeta) []engine.SampleRow {
	V := b.cfg.VocabSize
	if cap(b.rows) < m.R {
		b.rows = make([]engine.SampleRow, m.R)
	}
	rows := b.rows[:m.R]
	ids := unsafe.Slice((*int32)(b.resHost), m.R)
	for k := 0; k < m.R; k++ {
		r := engine.SampleRow{Argmax: int(ids[k])}
		if k < m.L {
			r.Logits = unsafe.Slice((*float32)(unsafe.Add(b.resHost, b.resLogitsOff+k*V*4)), V)
		}
		rows[m.Order[k]] = r
	}
	return rows
}

// forwardDevice queues the whole forward pass on the stream: one forward
// for every architecture, the Config choosing what each launch does (the
// norm, learned or rotary positions, biases, q/k norms, the MLP's form).
func (b *Backend) forwardDevice(m *batchMeta) error {
	c := b.cfg
	C, D, NH, V := c.Hidden, c.HeadDim, c.Heads, c.VocabSize
	KVD, I := c.KVDim(), c.Intermediate
	N := m.NP // the rows launched: a graph step's padded shape
	i32 := DevicePtr(4)
	tokens := b.meta + i32*DevicePtr(m.OffTokens)
	pos := b.meta + i32*DevicePtr(m.OffPos)
	seq := b.meta + i32*DevicePtr(m.OffSeq)
	bt := b.meta + i32*DevicePtr(m.OffBlocks)
	sample := b.meta + i32*DevicePtr(m.OffSample)
	eps := float32(c.NormEps)
	rms := 0
	if c.Norm == model.RMSNorm {
		rms = 1
	}
	rowGrid := [3]uint32{uint32(N), 1, 1}
	rowBlock := [3]uint32{rowThreads, 1, 1}
	useErf := 0
	if c.Activation == model.GeluErf {
		useErf = 1
	}
	layerBytes := DevicePtr(b.numBlocks*b.blockSize*KVD) * DevicePtr(b.dt.size)
	stride := m.MaxBlocks

	a := &b.args
	if b.prof != nil {
		b.prof.begin()
	}
	if b.w.embedScales != 0 {
		if err := b.launch(b.fn.embedQ8, rowGrid, rowBlock, 0, a.reset().ptr(b.x).ptr(b.w.embed).ptr(b.w.embedScales).ptr(b.w.positions).ptr(tokens).ptr(pos).i32(C)); err != nil {
			return err
		}
	} else if err := b.launch(b.fn.embed, rowGrid, rowBlock, 0, a.reset().ptr(b.x).ptr(b.w.embed).ptr(b.w.positions).ptr(tokens).ptr(pos).i32(C)); err != nil {
		return err
	}
	for l := range c.Layers {
		w := &b.w.layers[l]
		kc := b.kc + DevicePtr(l)*layerBytes
		vc := b.vc + DevicePtr(l)*layerBytes
		scale := c.AttnScale
		if c.ScaleAttnByInverseLayerIdx {
			scale /= float64(l + 1)
		}
		// The attention norm (from the second layer on, the previous
		// layer's last residual add did it).
		if l == 0 {
			if err := b.launch(b.fn.norm, rowGrid, rowBlock, 0, a.reset().ptr(b.h).ptr(b.x).ptr(0).ptr(w.attnNorm.w).ptr(w.attnNorm.b).i32(C).f32(eps).i32(rms)); err != nil {
				return fmt.Errorf("cuda: layer %d: %w", l, err)
			}
		}
		// Queries, keys and values: one GEMM.
		if err := b.linear(b.gemm, b.h, &w.qkv, N); err != nil {
			return fmt.Errorf("cuda: layer %d: %w", l, err)
		}
		// Bias, q/k norm, rotary embedding; K and V into the paged cache.
		if err := b.launch(b.fn.qkvStore, rowGrid, rowBlock, 0, a.reset().ptr(b.q).ptr(b.gemm).ptr(w.qkv.b).ptr(w.qNorm).ptr(w.kNorm).ptr(b.w.invFreq).
			ptr(kc).ptr(vc).ptr(pos).ptr(seq).ptr(bt).i32(stride).i32(b.blockSize).i32(NH).i32(c.KVHeads).i32(D).f32(eps)); err != nil {
			return fmt.Errorf("cuda: layer %d: %w", l, err)
		}
		// Causal paged attention.
		if err := b.attend(m, kc, vc, float32(scale)); err != nil {
			return fmt.Errorf("cuda: layer %d: %w", l, err)
		}
		// The output projection, + bias into the residual stream, then the
		// MLP norm.
		if err := b.linear(b.gemm, b.att, &w.o, N); err != nil {
			return fmt.Errorf("cuda: layer %d: %w", l, err)
		}
		if err := b.launch(b.fn.addNorm, rowGrid, rowBlock, 0, a.reset().ptr(b.h).ptr(b.x).ptr(b.gemm).ptr(w.o.b).ptr(w.mlpNorm.w).ptr(w.mlpNorm.b).i32(C).f32(eps).i32(rms)); err != nil {
			return fmt.Errorf("cuda: layer %d: %w", l, err)
		}
		// The MLP's input projection (gate and up side by side when gated)
		// and its activation.
		if err := b.linear(b.gemm, b.h, &w.up, N); err != nil {
			return fmt.Errorf("cuda: layer %d: %w", l, err)
		}
		if c.MLP == model.MLPGated {
			if err := b.elementwise(b.fn.siluMul, N*I, a.reset().ptr(b.act).ptr(b.gemm).ptr(w.up.b).i32(N).i32(I)); err != nil {
				return fmt.Errorf("cuda: layer %d: %w", l, err)
			}
		} else if err := b.elementwise(b.fn.biasAct, N*I, a.reset().ptr(b.act).ptr(b.gemm).ptr(w.up.b).i32(N).i32(I).i32(useErf)); err != nil {
			return fmt.Errorf("cuda: layer %d: %w", l, err)
		}
		if err := b.linear(b.gemm, b.act, &w.down, N); err != nil {
			return fmt.Errorf("cuda: layer %d: %w", l, err)
		}
		// + bias into the residual stream, then the next layer's attention
		// norm; the last layer's final norm runs on the sampled rows only.
		if l+1 < c.Layers {
			next := &b.w.layers[l+1]
			if err := b.launch(b.fn.addNorm, rowGrid, rowBlock, 0, a.reset().ptr(b.h).ptr(b.x).ptr(b.gemm).ptr(w.down.b).ptr(next.attnNorm.w).ptr(next.attnNorm.b).i32(C).f32(eps).i32(rms)); err != nil {
				return fmt.Errorf("cuda: layer %d: %w", l, err)
			}
		} else if err := b.elementwise(b.fn.residual, N*C, a.reset().ptr(b.x).ptr(b.gemm).ptr(w.down.b).i32(N).i32(C)); err != nil {
			return fmt.Errorf("cuda: layer %d: %w", l, err)
		}
	}
	R := m.RP
	if R == 0 {
		return nil
	}
	if err := b.launch(b.fn.norm, [3]uint32{uint32(R), 1, 1}, rowBlock, 0, a.reset().ptr(b.hs).ptr(b.x).ptr(sample).ptr(b.w.final.w).ptr(b.w.final.b).i32(C).f32(eps).i32(rms)); err != nil {
		return err
	}
	logits := b.res + DevicePtr(b.resLogitsOff)
	if b.w.lmHeadScales != 0 {
		if err := b.linearQ8(logits, b.hs, b.w.lmHead, b.w.lmHeadScales, C, V, R, "LM head"); err != nil {
			return err
		}
		return b.launch(b.fn.argmax, [3]uint32{uint32(R), 1, 1}, [3]uint32{argmaxThreads, 1, 1}, 0, a.reset().ptr(b.res).ptr(logits).i32(V))
	}
	// logits[R][V] = hs[R][C] · lmHead[V][C]ᵀ. Column-major, that is
	// logitsᵀ (V×R) = lmHead (V×C, read as the transpose of the C×V
	// column-major view of the row-major array) · hsᵀ (C×R).
	if err := b.blas.GemmEx(Gemm{
		TransA: OpT, TransB: OpN, M: V, N: R, K: C,
		A: b.w.lmHead, AType: b.dt.blas, LDA: C,
		B: b.hs, BType: b.dt.blas, LDB: C,
		C: logits, CType: DataFloat32, LDC: V,
		Alpha: 1,
	}); err != nil {
		return fmt.Errorf("cuda: LM head: %w", err)
	}
	if b.prof != nil {
		b.prof.mark("gemm LM head")
	}
	return b.launch(b.fn.argmax, [3]uint32{uint32(R), 1, 1}, [3]uint32{argmaxThreads, 1, 1}, 0, a.reset().ptr(b.res).ptr(logits).i32(V))
}

// linear computes out[M][p.out] = in[M][p.in] · W (float32 result) for a
// projection group. cuBLAS is column-major, where the row-major arrays read
// as outᵀ (out×M) and inᵀ (in×M), so outᵀ = op(A) · inᵀ with op(A) the
// out×in matrix: an in×out matrix (GPT-2's Conv1D) reads column-major as
// exactly that (no transpose, lda out); an out×in one (nn.Linear) reads as
// its transpose, so it is transposed back (OpT, lda in), as the LM head is.
func (b *Backend) linear(out, in DevicePtr, p *devLinear, M int) error {
	if p.scales != 0 {
		return b.linearQ8(out, in, p.w, p.scales, p.in, p.out, M, "")
	}
	ta, lda := OpT, p.in
	if p.inMajor {
		ta, lda = OpN, p.out
	}
	err := b.blas.GemmEx(Gemm{
		TransA: ta, TransB: OpN, M: p.out, N: M, K: p.in,
		A: p.w, AType: b.dt.blas, LDA: lda,
		B: in, BType: b.dt.blas, LDB: p.in,
		C: out, CType: DataFloat32, LDC: p.out,
		Alpha: 1,
	})
	if b.prof != nil && err == nil {
		b.prof.mark(fmt.Sprintf("gemm %d→%d", p.in, p.out))
	}
	return err
}

// attend queues one layer's causal attention over the step's rows, which
// qkv_store has just written into the paged cache:
//
//   - flash_prefill for the rows of sequences with two or more rows in the
//     step (prefill chunks), a block per query tile of up to flashRows rows
//     and head, where the head size allows (flashHeadDim); a grid of
//     TilesCap tile slots, the unused ones exiting at once;
//   - the row kernels for the other rows (decodes), or for every row where
//     flash_prefill does not apply: one block per (row, head), and, where
//     the context bound is long and the rows few (attentionSplits), split
//     over the context (attention_split, then attention_combine). The
//     original kernel, attention, runs where nothing is split and every
//     row goes to the row kernel (head sizes flash_prefill does not take,
//     and decode-only steps, the kernel the H200 checked): attention_split
//     with one split computes the same thing through a row list, for the
//     decode rows of a step that also has prefill chunks.
func (b *Backend) attend(m *batchMeta, kc, vc DevicePtr, scale float32) error {
	c := b.cfg
	D, NH, QD, KVD := c.HeadDim, c.Heads, c.QDim(), c.KVDim()
	i32 := DevicePtr(4)
	pos := b.meta + i32*DevicePtr(m.OffPos)
	seq := b.meta + i32*DevicePtr(m.OffSeq)
	bt := b.meta + i32*DevicePtr(m.OffBlocks)
	a := &b.args
	flash := flashHeadDim(D) && !b.oldAttention
	// A padded graph step launches over the bounds whatever its rows are
	// (tile slots and decode-row slots past the real ones exit at once),
	// so that every step of its shape replays the same launches.
	if flash && (m.Tiles > 0 || m.Padded) {
		tiles := b.meta + i32*DevicePtr(m.OffTiles)
		if err := b.launch(b.fn.flashPrefill, [3]uint32{uint32(m.TilesCap), uint32(NH), 1}, [3]uint32{flashThreads, 1, 1}, uint32(flashShared(D)),
			a.reset().ptr(b.att).ptr(b.q).ptr(kc).ptr(vc).ptr(pos).ptr(seq).ptr(bt).ptr(tiles).i32(m.MaxBlocks).i32(b.blockSize).i32(QD).i32(KVD).i32(D).i32(c.GroupSize()).f32(scale)); err != nil {
			return err
		}
	}
	rows, n := DevicePtr(0), m.NP
	if flash {
		rows, n = b.meta+i32*DevicePtr(m.OffDec), m.Dec
		if m.Padded {
			n = m.SP
		}
	}
	if n == 0 {
		return nil
	}
	T := attentionThreads(D)
	block := [3]uint32{uint32(T), 1, 1}
	shared := uint32(attentionShared(D, b.dt.size))
	splitRows := n
	if m.SplitRows > 0 {
		splitRows = m.SplitRows
	}
	splits, splitLen := attentionSplits(splitRows, NH, m.SplitCtx, T)
	if b.oldAttention {
		splits = 1
	}
	if splits == 1 && (!flash || m.Dec == m.N && !m.Padded) {
		// Every row is a row-kernel row (rows would be the identity).
		return b.launch(b.fn.attention, [3]uint32{uint32(n), uint32(NH), 1}, block, shared,
			a.reset().ptr(b.att).ptr(b.q).ptr(kc).ptr(vc).ptr(pos).ptr(seq).ptr(bt).i32(m.MaxBlocks).i32(b.blockSize).i32(QD).i32(KVD).i32(D).i32(c.GroupSize()).f32(scale))
	}
	if err := b.launch(b.fn.attentionSplit, [3]uint32{uint32(n), uint32(NH), uint32(splits)}, block, shared,
		a.reset().ptr(b.att).ptr(b.split).ptr(b.q).ptr(kc).ptr(vc).ptr(pos).ptr(seq).ptr(bt).ptr(rows).i32(m.MaxBlocks).i32(b.blockSize).i32(QD).i32(KVD).i32(D).i32(c.GroupSize()).f32(scale).i32(splitLen)); err != nil {
		return err
	}
	if splits == 1 {
		return nil
	}
	return b.launch(b.fn.attentionCombine, [3]uint32{uint32(n), uint32(NH), 1}, [3]uint32{uint32(min((D+31)/32*32, 256)), 1, 1}, 0,
		a.reset().ptr(b.att).ptr(b.split).ptr(rows).i32(QD).i32(D).i32(splits))
}

// flash_prefill's shape (FLASH_ROWS, FLASH_KEYS, FLASH_THREADS in
// decoder.cu). 16 query rows a block is the most whose tiles fit the
// 48 KiB of shared memory at head size 128 with float32 staging (queries
// 16×128, keys and values 32×128 each: 43,904 bytes; 32 rows would need
// 52 KiB), and keeps a short chunk's grid wide (a 64-token chunk of 14
// heads is 56 blocks, where 64-row tiles would give 14). Each key and
// value tile is then read from the cache once per 16 rows instead of once
// per row.
const (
	flashRows    = 16
	flashKeys    = 32
	flashThreads = 128
)

// flashHeadDim reports whether flash_prefill takes head size D: a multiple
// of 4 (its shared-memory rows are read 16 bytes at a time) up to 128 (a
// thread keeps 4 dimensions of 4 rows).
func flashHeadDim(D int) bool { return D%4 == 0 && D <= 128 }

// flashShared is flash_prefill's dynamic shared memory for head size D:
// queries [16][D], keys [32][D+4], values [32][D], weights [16][33], and
// 16 rescales, 16 sums, 16 positions and 32 slots.
func flashShared(D int) int {
	return (flashRows*D + flashKeys*(D+4) + flashKeys*D + flashRows*(flashKeys+1) + 3*flashRows + flashKeys) * 4
}

// Split-context decode attention (attention_split + attention_combine).
// A decode row's context is split so that the step has about
// splitTargetBlocks blocks (two per SM of a 132-SM H100/H200: a batch of 4
// rows of 14 heads has 56 blocks unsplit, 280 in 5 splits), each split at
// least splitMinPositions long (shorter splits would spend more on the
// combine than they save) and at most maxSplits. A constant target rather
// than the device's SM count keeps the results the same on every GPU.
const (
	splitTargetBlocks = 264
	maxSplits         = 32
)

// splitMinPositions is a variable so that tests can split short contexts.
var splitMinPositions = 512

// attentionSplits is the number of splits and the positions per split for
// n decode rows of heads query heads whose contexts are at most ctx
// positions, with the row kernel's tile of tile positions: 1 split (and
// ctx rounded up to tiles) where splitting does not pay. splitLen is a multiple of tile, so
// that each split takes the unsplit kernel's tiles. It depends only on its
// arguments: a CUDA graph's step derives ctx from its block-table stride.
func attentionSplits(n, heads, ctx, tile int) (splits, splitLen int) {
	most := min(ctx/splitMinPositions, maxSplits)
	want := (splitTargetBlocks + n*heads - 1) / (n * heads)
	s := min(want, most)
	if s < 2 {
		return 1, (ctx + tile - 1) / tile * tile
	}
	splitLen = ((ctx+s-1)/s + tile - 1) / tile * tile
	return (ctx + splitLen - 1) / splitLen, splitLen
}

// splitPartBytes is the float32 scratch of the split partials for head
// size D: rows·heads·splits·(D+2) floats, and rows·heads·splits < 2 ×
// splitTargetBlocks whenever there is more than one split.
func splitPartBytes(D int) int { return 2 * splitTargetBlocks * (D + 2) * 4 }

// attentionThreads is the attention kernel's blockDim for head size D:
// max(1, 256/D) times D threads, rounded up to whole warps, because the
// kernel's block reductions shuffle across full warps. It is also the
// kernel's tile: the positions one pass of the online softmax takes. A
// head size of 64 gives 256: a decode step's scores up to position 255 in
// one pass, and its weighted values 32 positions at a time (8 threads a
// position, each a 16-byte pack). With 128 the H200 spent 12.9 us a layer
// at position 128 (GPT-2 124M).
func attentionThreads(D int) int { return (D*max(1, 256/D) + 31) / 32 * 32 }

// attentionShared is the attention kernel's dynamic shared memory in bytes
// for head size D with elemSize-byte storage: one tile's weights and cache
// slots, the scaled query, and the partial outputs of the weighted values,
// room for one 16-byte pack per thread (a head row loaded element by
// element needs less). It does not depend on the context length.
func attentionShared(D, elemSize int) int {
	T := attentionThreads(D)
	return (2*T + D + T*16/elemSize) * 4
}

// attentionStaticShared is the attention kernel's static shared memory in
// bytes (its scratch[32] of floats), which counts against the same 48 KiB
// per block as the dynamic part.
const attentionStaticShared = 32 * 4

// elementwise launches a grid-stride kernel over n elements.
func (b *Backend) elementwise(f Function, n int, a *kernelArgs) error {
	blocks := min((n+rowThreads-1)/rowThreads, ewBlocksMax)
	return b.launch(f, [3]uint32{uint32(blocks), 1, 1}, [3]uint32{rowThreads, 1, 1}, 0, a)
}

func (b *Backend) launch(f Function, grid, block [3]uint32, shared uint32, a *kernelArgs) error {
	err := b.drv.Launch(f, grid, block, shared, b.stream, unsafe.Pointer(&a.ptrs[0]))
	if b.prof != nil && err == nil {
		b.prof.launched(f)
	}
	return err
}
