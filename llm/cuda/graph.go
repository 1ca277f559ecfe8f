package cuda

import (
	"errors"

	"github.com/tinyserve/tinyserve/llm/engine"
)

// CUDA graphs (Options.CUDAGraphs). A step runs from a graph captured for
// its shape, graphKey: the token rows and sampled rows its kernels and
// GEMMs are launched for, and the stride of its block tables. Everything
// else that changes from step to step (tokens, positions, each row's
// sequence, the block tables, which rows are sampled) is in the metadata
// copied before the graph is launched, and the real R and L size the
// results copy after it; neither copy is in the graph.
//
//   - A decode-only step (every sequence decodes one token and is sampled)
//     of up to maxGraphBatch sequences is captured at its exact size, as
//     before: no padding, so its GEMMs have the eager step's shapes.
//   - Any other step of up to maxGraphTokens token rows — mixed steps of
//     prefill chunks and decodes, prefill-only steps, chunks that sample
//     nothing, prompt-logits steps, and larger decode-only steps — is padded
//     to the smallest bucket of graphBuckets holding its N token rows, and
//     its R sampled rows to the smallest bucket holding R (0 stays 0). The
//     padding rows are no-ops for the KV cache and change no real row
//     (batchMeta says how).
//   - Larger steps run eagerly: at 512 rows their kernels and GEMMs take
//     longer on the GPU than the host takes to launch them, so launches
//     overlap the GPU's work and a graph saves little.
//
// The block tables' stride is graphStride's power of two for every graph
// step. Attention's grid is rows × heads and its shared memory does not
// depend on the context, so no launch depends on anything but the key. A
// kernel whose grid counts sequences (a split-context attention) can take
// the key's rows as its bound — a step has at most as many sequences as
// token rows — with the sequences past the step's own exiting at once.

// maxGraphBatch is the largest decode-only step captured at its exact size.
const maxGraphBatch = 64

// graphBuckets are the padded token-row counts of graph steps: powers of
// two and the halfway points between them (x1.5) from 16 on. A step pads
// at most a third of its bucket's rows (N = 129 runs as 192). Up to 16
// rows a step's GEMMs read each weight once whatever the rows, so padding
// there costs almost nothing; beyond, the products grow with the rows and
// the half-octave steps bound the waste, with 15 buckets rather than
// vLLM's 67 (1, 2, 4, then every multiple of 8 to 512), since the sampled
// rows multiply the keys. The buckets up to 16 are the only ones up to 16,
// so that a Q8_0 product takes q8_gemv (up to q8GemvMaxRows rows) for a
// padded step exactly when it does for the step itself.
var graphBuckets = [...]int{1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512}

// maxGraphTokens is the most token rows a step replayed from a graph has:
// the last bucket.
var maxGraphTokens = graphBuckets[len(graphBuckets)-1]

// maxGraphs bounds the graphs kept. The keys are bounded anyway (64 exact
// decode shapes and 135 padded ones per stride: 199
// for each power of two of the context from 256 positions on), but a long
// context passes through several strides; when a capture would exceed
// this, the graph launched least recently is destroyed first. (A variable so that a test
// can make it evict.)
var maxGraphs = 256

// minGraphStride is the narrowest block-table stride of a graph step, in
// blocks (256 positions of 16).
const minGraphStride = 16

// graphKey names a captured step: the token rows and sampled rows it is
// launched for, the stride its block tables are packed with, and whether
// it is padded (a bucket's shape) rather than an exact decode-only step:
// the two launch attention differently (forward.go's attend), so a decode
// of 4 and a mixed step padded to 4 rows and 4 sampled rows never share a
// graph.
type graphKey struct {
	rows, sample, stride int
	padded               bool
}

// graphExec is a captured step and when it was last launched (for
// maxGraphs' eviction).
type graphExec struct {
	exec GraphExec
	used uint64
}

// graphBucket is the smallest bucket of graphBuckets holding n rows (0 for
// 0), or 0 and false past the last.
func graphBucket(n int) (int, bool) {
	if n == 0 {
		return 0, true
	}
	for _, b := range graphBuckets {
		if b >= n {
			return b, true
		}
	}
	return 0, false
}

// graphStride is the block-table stride of a graph step whose longest
// sequence needs need blocks: the next power of two from minGraphStride on,
// capped at the full context's maxStride. A graph fixes the stride, so one
// must serve every step of its shape while the contexts grow; a power of
// two keeps the graphs per shape few (a new one is captured each time the
// longest context doubles) while the metadata copied per step stays within
// twice what the step needs, where the full context's stride would copy a
// 32K-context model's whole tables (2,048 blocks a sequence) every step.
func graphStride(need, maxStride int) int {
	s := minGraphStride
	for s < need {
		s *= 2
	}
	return min(s, maxStride)
}

// graphShape reports whether a step may run from a CUDA graph, and the
// key it runs under: graphs are on, the step is not profiled, and it has
// at most maxGraphTokens token rows. A decode-only step of up to
// maxGraphBatch sequences keeps its exact size; any other is padded to
// graphBuckets (see the top of this file).
func (b *Backend) graphShape(batch *engine.Batch) (graphKey, bool) {
	// A profiled step runs eagerly: its events time each launch.
	if !b.opts.CUDAGraphs || b.graphsOff || b.prof != nil || len(batch.Seqs) == 0 {
		return graphKey{}, false
	}
	return b.stepShape(batch)
}

// stepShape is the graph key a step would run under with graphs on, and
// whether it has one: graphShape without the backend's state, which an
// eager step also uses so that it launches attention as its graph would
// (forward.go's attend).
func (b *Backend) stepShape(batch *engine.Batch) (graphKey, bool) {
	n, r, need, decode := 0, 0, 1, true
	for i := range batch.Seqs {
		s := &batch.Seqs[i]
		n += len(s.Tokens)
		k, _ := resultRows(s)
		r += k
		need = max(need, (s.StartPos+len(s.Tokens)+b.blockSize-1)/b.blockSize)
		if len(s.Tokens) != 1 || !s.Sample || s.PromptLogits {
			decode = false
		}
	}
	if n == 0 {
		return graphKey{}, false
	}
	stride := graphStride(need, (b.cfg.MaxPositions+b.blockSize-1)/b.blockSize)
	if decode && n <= maxGraphBatch {
		return graphKey{n, r, stride, false}, true
	}
	rows, ok := graphBucket(n)
	if !ok {
		return graphKey{}, false
	}
	sample, _ := graphBucket(r)
	return graphKey{rows, sample, stride, true}, true
}

// forwardGraph runs a step packed to a graph's shape. The first step of a
// key runs eagerly (with the graph's parameters, which also lets cuBLAS set
// up its per-stream state outside a capture), the second is captured into a
// graph, and every later one replays it. The metadata copy queued before
// and the results copy queued after stay outside the graph. A failed capture
// turns graphs off for the backend's lifetime and runs the step eagerly.
func (b *Backend) forwardGraph(m *batchMeta) error {
	key := graphKey{m.NP, m.RP, m.MaxBlocks, m.Padded}
	b.graphClock++
	if g, ok := b.graphs[key]; ok {
		g.used = b.graphClock
		b.graphs[key] = g
		return b.drv.GraphLaunch(g.exec, b.stream)
	}
	if b.graphSeen == nil {
		b.graphSeen = map[graphKey]bool{}
		b.graphs = map[graphKey]graphExec{}
	}
	if !b.graphSeen[key] {
		b.graphSeen[key] = true
		return b.forwardDevice(m)
	}
	if len(b.graphs) >= maxGraphs {
		b.evictGraph()
	}
	ge, err := b.capture(m)
	if err != nil {
		b.log.Warn("cuda: capturing a step failed; CUDA graphs are off from now on", "rows", m.NP, "sampled", m.RP, "err", err)
		b.graphsOff = true
		b.dropGraphs()
		return b.forwardDevice(m)
	}
	b.graphs[key] = graphExec{ge, b.graphClock}
	b.log.Debug("cuda: captured a step graph", "rows", m.NP, "sampled", m.RP, "stride", m.MaxBlocks, "graphs", len(b.graphs))
	return b.drv.GraphLaunch(ge, b.stream)
}

// evictGraph destroys the graph launched least recently. Its key stays
// seen, so that its next step is captured again at once.
func (b *Backend) evictGraph() {
	var old graphKey
	first := true
	for k, g := range b.graphs {
		if first || g.used < b.graphs[old].used {
			old, first = k, false
		}
	}
	if !first {
		_ = b.drv.GraphExecDestroy(b.graphs[old].exec)
		delete(b.graphs, old)
	}
}

// capture records the forward pass into a graph and instantiates it.
// Capture is always ended, even after a failed launch, so the stream
// returns to normal.
func (b *Backend) capture(m *batchMeta) (GraphExec, error) {
	if err := b.drv.BeginCapture(b.stream, CaptureModeRelaxed); err != nil {
		return 0, err
	}
	ferr := b.forwardDevice(m)
	g, eerr := b.drv.EndCapture(b.stream)
	if ferr != nil || eerr != nil {
		if g != 0 {
			_ = b.drv.GraphDestroy(g)
		}
		return 0, errors.Join(ferr, eerr)
	}
	ge, err := b.drv.GraphInstantiate(g)
	_ = b.drv.GraphDestroy(g) // the executable graph keeps what it needs
	return ge, err
}

// dropGraphs destroys the captured graphs: they hold the addresses of
// buffers that are about to be reallocated or freed.
func (b *Backend) dropGraphs() {
	for k, g := range b.graphs {
		_ = b.drv.GraphExecDestroy(g.exec)
		delete(b.graphs, k)
	}
	clear(b.graphSeen)
}
