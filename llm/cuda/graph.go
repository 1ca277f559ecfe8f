package cuda

import (
	"errors"

	"github.com/tinyserve/tinyserve/llm/engine"
)

// maxGraphBatch is the largest decode batch replayed from a CUDA graph;
// larger steps are launched eagerly (their launch overhead is a smaller
// share of the step).
const maxGraphBatch = 64

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
// size runs eagerly (with the graph's parameters, which also lets cuBLAS set
// up its per-stream state outside a capture), the second is captured into a
// graph, and every later one replays it. The metadata copy queued before
// and the results copy queued after stay outside the graph. A failed capture
// turns graphs off for the backend's lifetime and runs the step eagerly.
func (b *Backend) forwardGraph(m *batchMeta, npos int) error {
	B := m.S
	if ge, ok := b.graphs[B]; ok {
		return b.drv.GraphLaunch(ge, b.stream)
	}
	if b.graphSeen == nil {
		b.graphSeen = map[int]bool{}
		b.graphs = map[int]GraphExec{}
	}
	if !b.graphSeen[B] {
		b.graphSeen[B] = true
		return b.forwardDevice(m, npos)
	}
	ge, err := b.capture(m, npos)
	if err != nil {
		b.log.Warn("cuda: capturing a decode step failed; CUDA graphs are off from now on", "batch", B, "err", err)
		b.graphsOff = true
		b.dropGraphs()
		return b.forwardDevice(m, npos)
	}
	b.graphs[B] = ge
	b.log.Debug("cuda: captured a decode graph", "batch", B)
	return b.drv.GraphLaunch(ge, b.stream)
}

// capture records the forward pass into a graph and instantiates it.
// Capture is always ended, even after a failed launch, so the stream
// returns to normal.
func (b *Backend) capture(m *batchMeta, npos int) (GraphExec, error) {
	if err := b.drv.BeginCapture(b.stream, CaptureModeRelaxed); err != nil {
		return 0, err
	}
	ferr := b.forwardDevice(m, npos)
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
