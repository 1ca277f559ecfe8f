package cuda

import (
	"errors"

	"github.com/tinyserve/tinyserve/llm/engine"
)

// maxGraphBatch is the largest decode batch replayed from a CUDA graph;
// larger steps are launched eagerly (their launch overhead is a smaller
// share of the step).
const maxGraphBatch = 64

// minGraphStride is the narrowest block-table stride of a graph step, in
// blocks (256 positions of 16).
const minGraphStride = 16

// graphKey names a captured decode step: its batch size and the stride its
// block tables are packed with.
type graphKey struct{ batch, stride int }

// graphStride is the block-table stride of a graph step whose longest
// sequence needs need blocks: the next power of two from minGraphStride on,
// capped at the full context's maxStride. A graph fixes the stride, so one
// must serve every step of its batch size while the contexts grow; a
// power of two keeps the graphs per batch size few (a new one is captured
// each time the longest context doubles) while the metadata copied per step
// stays within twice what the step needs, where the full context's stride
// would copy a 32K-context model's whole tables (2,048 blocks a sequence)
// every step.
func graphStride(need, maxStride int) int {
	s := minGraphStride
	for s < need {
		s *= 2
	}
	return min(s, maxStride)
}

// graphNeed is the most blocks a sequence of the decode-only batch needs.
func graphNeed(batch *engine.Batch, blockSize int) int {
	need := 1
	for i := range batch.Seqs {
		s := &batch.Seqs[i]
		need = max(need, (s.StartPos+len(s.Tokens)+blockSize-1)/blockSize)
	}
	return need
}

// graphable reports whether a step may run from a CUDA graph: graphs are
// on, and every sequence decodes exactly one token and is sampled. Then the
// kernels' launch parameters depend only on the number of sequences.
func (b *Backend) graphable(batch *engine.Batch) bool {
	// A profiled step runs eagerly: its events time each launch.
	if !b.opts.CUDAGraphs || b.graphsOff || b.prof != nil || len(batch.Seqs) == 0 || len(batch.Seqs) > maxGraphBatch {
		return false
	}
	for i := range batch.Seqs {
		s := &batch.Seqs[i]
		if len(s.Tokens) != 1 || !s.Sample || s.PromptLogits {
			return false
		}
	}
	return true
}

// forwardGraph runs a decode-only step of B sequences. The first step of a
// size and stride runs eagerly (with the graph's parameters, which also lets cuBLAS set
// up its per-stream state outside a capture), the second is captured into a
// graph, and every later one replays it. The metadata copy queued before
// and the results copy queued after stay outside the graph. A failed capture
// turns graphs off for the backend's lifetime and runs the step eagerly.
func (b *Backend) forwardGraph(m *batchMeta) error {
	key := graphKey{m.S, m.MaxBlocks}
	if ge, ok := b.graphs[key]; ok {
		return b.drv.GraphLaunch(ge, b.stream)
	}
	if b.graphSeen == nil {
		b.graphSeen = map[graphKey]bool{}
		b.graphs = map[graphKey]GraphExec{}
	}
	if !b.graphSeen[key] {
		b.graphSeen[key] = true
		return b.forwardDevice(m)
	}
	ge, err := b.capture(m)
	if err != nil {
		b.log.Warn("cuda: capturing a decode step failed; CUDA graphs are off from now on", "batch", m.S, "err", err)
		b.graphsOff = true
		b.dropGraphs()
		return b.forwardDevice(m)
	}
	b.graphs[key] = ge
	b.log.Debug("cuda: captured a decode graph", "batch", m.S, "stride", m.MaxBlocks)
	return b.drv.GraphLaunch(ge, b.stream)
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
	for k, ge := range b.graphs {
		_ = b.drv.GraphExecDestroy(ge)
		delete(b.graphs, k)
	}
	clear(b.graphSeen)
}
