package cuda

import (
	"fmt"

	"github.com/tinyserve/tinyserve/llm/tensor"
)

// Q8_0 weights on the device (issue 32 item 3). A model quantized to Q8_0
// (model.Quantize, or a Q8_0 GGUF file) keeps its projection matrices, its
// token table and its LM head 8-bit on the GPU, about 1.06 bytes a weight
// against float16's 2, and the step's products read them as they are:
//
//   - layout: each Q8_0 matrix (N outputs × K inputs, ggml's blocks of 32
//     along K) is two arrays, the int8 quants [N][K] and the float16 scales
//     [N][K/32], so that every 16-byte load of the quants is aligned (ggml's
//     34-byte blocks are not) — see kernels/decoder.cu;
//   - up to q8GemvMaxRows token rows (a decode step), q8_gemv: a block per
//     four outputs, its threads splitting the rows' 16-byte chunks, each
//     dequantizing them in registers (without the slow int-to-float
//     instruction) into float32 sums of up to 8 activation rows at once;
//   - more rows (a prefill chunk), q8_dequant writes the group's weights in
//     the storage type into one scratch matrix (b.dq, the size of the
//     largest group, not a second copy of the weights) and cuBLAS multiplies
//     as for any other weights: a prefill is bound by arithmetic, which
//     cuBLAS's tensor-core GEMMs do far better than a hand-written kernel,
//     and one pass over the weights to dequantize them costs less than the
//     GEMM once a chunk has more than a few rows. The LM head, a matrix of
//     the vocabulary's size, is dequantized and multiplied a slice of rows
//     at a time through the same scratch.
//
// Both paths compute float32 sums of d·q·x, d·q being exact in float32, so
// in float32 the backend agrees with the CPU backend's Q8_0 kernels (which
// keep the activations in float32) to rounding.

// q8Array names the two arrays a Q8_0 matrix is uploaded as.
type q8Array int

const (
	q8None   q8Array = iota
	q8Quants         // int8 [N][K]
	q8Scales         // float16 [N][K/32]
)

// q8GemvRows are the row tiles q8_gemv is instantiated for (its R): a step
// of M token rows uses the smallest tile holding M, or tiles of 8 along
// grid.y, each tile reading the weights once.
var q8GemvRows = [...]int{1, 2, 4, 8}

// q8GemvMaxRows is the most token rows a Q8_0 product takes through
// q8_gemv; steps with more dequantize into the scratch and call cuBLAS. At
// 16 the GEMV reads the weights twice (two tiles of 8), the second time
// mostly from L2; past that the dequantization's extra pass is cheaper.
// Not yet tuned on a GPU.
const q8GemvMaxRows = 16

// q8GemvOutputs is q8_gemv's outputs per block (Q8_GEMV_OUTPUTS in the
// kernel): each activation it converts serves that many weight rows.
const q8GemvOutputs = 4

// q8GemvMaxThreads bounds q8_gemv's block: a row's 16-byte chunks, one a
// thread, in whole warps, up to this many.
const q8GemvMaxThreads = 256

// q8GemvLaunch is q8_gemv's instantiation (an index into q8GemvRows) and
// launch shape for M rows of K inputs and N outputs: q8GemvOutputs
// outputs a block, the smallest row tile holding M (or tiles of 8 along
// grid.y), and a thread for each 16-byte chunk of a weight row.
func q8GemvLaunch(M, K, N int) (k int, grid, block [3]uint32) {
	k = len(q8GemvRows) - 1
	for k > 0 && q8GemvRows[k-1] >= M {
		k--
	}
	R := q8GemvRows[k]
	threads := min((K/16+31)/32*32, q8GemvMaxThreads)
	return k, [3]uint32{uint32((N + q8GemvOutputs - 1) / q8GemvOutputs), uint32((M + R - 1) / R), 1}, [3]uint32{uint32(threads), 1, 1}
}

// q8ScratchRows is how many vocabulary rows a slice of a Q8_0 LM head's
// prefill product takes at least: the scratch holds the largest projection
// group or this many rows of the head, whichever is more. (A variable so
// that a test can make the head run in several slices.)
var q8ScratchRows = 4096

// splitQ8 writes the quants or the scales (which) of the Q8_0 parts,
// stacked row-wise, into dst.
func splitQ8(dst []byte, parts []tensor.Tensor, which q8Array) {
	off := 0
	for _, t := range parts {
		blocks := t.Q8_0Blocks()
		for k := 0; k+tensor.Q8_0BlockBytes <= len(blocks); k += tensor.Q8_0BlockBytes {
			blk := blocks[k : k+tensor.Q8_0BlockBytes]
			if which == q8Quants {
				off += copy(dst[off:], blk[2:])
			} else {
				dst[off], dst[off+1] = blk[0], blk[1]
				off += 2
			}
		}
	}
}

// allocDequantScratch allocates the prefill's dequantization scratch when
// some matrix is Q8_0: room for the largest Q8_0 projection group in the
// storage type, and for at least q8ScratchRows rows of a Q8_0 LM head.
func (b *Backend) allocDequantScratch() error {
	n := 0
	for l := range b.w.layers {
		dl := &b.w.layers[l]
		for _, p := range []*devLinear{&dl.qkv, &dl.o, &dl.up, &dl.down} {
			if p.scales != 0 {
				n = max(n, p.in*p.out)
			}
		}
	}
	if b.w.lmHeadScales != 0 {
		C, V := b.cfg.Hidden, b.cfg.VocabSize
		n = max(n, min(V, q8ScratchRows)*C)
	}
	if n == 0 {
		return nil
	}
	var err error
	if b.dq, err = b.drv.MemAlloc(n * b.dt.size); err != nil {
		return fmt.Errorf("cuda: Q8_0 dequantization scratch (%d MiB): %w", n*b.dt.size>>20, err)
	}
	b.dqElems = n
	return nil
}

// WeightBytes is the device memory holding the model's weights (one
// allocation; Q8_0 matrices in their 8-bit form), not counting the Q8_0
// prefill's scratch (DequantScratchBytes).
func (b *Backend) WeightBytes() int { return b.weightBytes }

// DequantScratchBytes is the device memory of the Q8_0 prefill's
// dequantization scratch: one matrix the size of the largest Q8_0
// projection group in the storage type (0 without Q8_0 weights).
func (b *Backend) DequantScratchBytes() int { return b.dqElems * b.dt.size }

// Q8_0 reports whether any weight matrix is on the device as Q8_0.
func (b *Backend) Q8_0() bool {
	if b.w.lmHeadScales != 0 || b.w.embedScales != 0 {
		return true
	}
	for l := range b.w.layers {
		if b.w.layers[l].qkv.scales != 0 || b.w.layers[l].up.scales != 0 ||
			b.w.layers[l].o.scales != 0 || b.w.layers[l].down.scales != 0 {
			return true
		}
	}
	return false
}

// linearQ8 computes out[M][N] (float32, row stride N) = in[M][K] · Wᵀ for
// the Q8_0 matrix W (quants q, scales s; N×K): q8_gemv for a decode
// step's few rows, else the dequantized weights in slices through the
// scratch and cuBLAS. label names the product in errors and the profile
// ("" for a projection: its K→N, formatted only when needed, so that a
// step allocates nothing).
func (b *Backend) linearQ8(out, in, q, s DevicePtr, K, N, M int, label string) error {
	if label == "" && b.prof != nil {
		label = fmt.Sprintf("%d→%d", K, N)
	}
	a := &b.args
	if M <= q8GemvMaxRows {
		k, grid, block := q8GemvLaunch(M, K, N)
		return b.launch(b.fn.q8Gemv[k], grid, block, 0, a.reset().ptr(out).ptr(in).ptr(q).ptr(s).i32(M).i32(K).i32(N))
	}
	rows := min(N, b.dqElems/K)
	if rows <= 0 {
		return fmt.Errorf("cuda: Q8_0 %d→%d %s: no dequantization scratch for rows of %d", K, N, label, K)
	}
	for n0 := 0; n0 < N; n0 += rows {
		n := min(rows, N-n0)
		chunks := n * K / 16
		if err := b.elementwise(b.fn.q8Dequant, chunks, a.reset().ptr(b.dq).ptr(q+DevicePtr(n0*K)).ptr(s+DevicePtr(n0*K/tensor.Q8_0BlockLen*2)).i32(chunks)); err != nil {
			return err
		}
		// outᵀ's rows n0.. (column-major N×M, ldc N) = the slice (n×K,
		// row-major, read as its transpose) · inᵀ, as linear's nn.Linear case.
		if err := b.blas.GemmEx(Gemm{
			TransA: OpT, TransB: OpN, M: n, N: M, K: K,
			A: b.dq, AType: b.dt.blas, LDA: K,
			B: in, BType: b.dt.blas, LDB: K,
			C: out + DevicePtr(4*n0), CType: DataFloat32, LDC: N,
			Alpha: 1,
		}); err != nil {
			return fmt.Errorf("cuda: Q8_0 %d→%d %s: %w", K, N, label, err)
		}
		if b.prof != nil {
			b.prof.mark("gemm " + label + " (dequantized)")
		}
	}
	return nil
}
