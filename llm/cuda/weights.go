package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"unsafe"

	"github.com/tinyserve/tinyserve/llm/model"
	"github.com/tinyserve/tinyserve/llm/tensor"
)

// devLinear is a projection group on the device: the model.Linear
// projections that read the same input (q, k and v; gate and up), their
// matrices stacked so that the group is one GEMM whose output row holds
// each projection's outputs side by side, and their biases likewise (b is
// 0 when no projection of the group has one; a projection without one
// gets zeros when another has).
type devLinear struct {
	w, b    DevicePtr
	in, out int
	// inMajor: w is [in][out] (GPT-2's Conv1D), else [out][in] (nn.Linear).
	inMajor bool
	// scales, when not 0, makes the group Q8_0 (q8.go): w is then its int8
	// quants [out][in] and scales its float16 scales [out][in/32].
	scales DevicePtr
}

// devNorm is a norm's gain and, for a LayerNorm, its bias (0 for none).
type devNorm struct{ w, b DevicePtr }

// devLayer is one block's parameters on the device; qNorm and kNorm are 0
// unless the config has per-head q/k norms.
type devLayer struct {
	attnNorm, mlpNorm devNorm
	qkv, o, up, down  devLinear
	qNorm, kNorm      DevicePtr
}

// devWeights are device addresses of the uploaded parameters. positions is
// 0 without learned positions, invFreq (float64, HeadDim/2) without rotary
// ones; lmHead is embed itself when the embeddings are tied.
type devWeights struct {
	embed, positions, lmHead, invFreq DevicePtr
	final                             devNorm
	layers                            []devLayer
	// embedScales and lmHeadScales, when not 0, make the token table and
	// the LM head Q8_0 (embed and lmHead their quants; one pair when tied).
	embedScales, lmHeadScales DevicePtr
}

// weightItem is one device tensor: parts stored one after another in the
// storage type (a zero part stands for lens[k] zeros), or raw bytes as
// they are, or (q8 set) one of the two arrays of Q8_0 parts.
type weightItem struct {
	dst   *DevicePtr
	parts []tensor.Tensor
	lens  []int
	raw   []byte
	q8    q8Array
}

func (it *weightItem) bytes(elemSize int) int {
	if it.raw != nil {
		return len(it.raw)
	}
	n := 0
	for _, l := range it.lens {
		n += l
	}
	switch it.q8 {
	case q8Quants:
		return n
	case q8Scales:
		return n / tensor.Q8_0BlockLen * 2
	}
	return n * elemSize
}

// planWeights lists every tensor to upload, with b.w's fields as their
// destinations. Bad weights (a projection group the GEMMs cannot stack) are
// an error naming them.
func (b *Backend) planWeights() ([]weightItem, error) {
	w := &b.m.Weights
	c := &b.cfg
	if len(w.Layers) != c.Layers {
		return nil, fmt.Errorf("cuda: model has %d layers of weights, config says %d", len(w.Layers), c.Layers)
	}
	var items []weightItem
	one := func(dst *DevicePtr, t tensor.Tensor) {
		if !t.IsZero() {
			items = append(items, weightItem{dst: dst, parts: []tensor.Tensor{t}, lens: []int{t.Len()}})
		}
	}
	norm := func(dst *devNorm, n model.NormWeights) {
		one(&dst.w, n.W)
		one(&dst.b, n.B)
	}
	linear := func(name string, dst *devLinear, ls []model.Linear) error {
		if len(ls) == 0 {
			return fmt.Errorf("cuda: %s has no projections", name)
		}
		*dst = devLinear{in: ls[0].In, inMajor: ls[0].InMajor}
		// A group all of whose matrices are Q8_0 stays 8-bit on the device;
		// a mixed one (a GGUF file may quantize q and k but not v) is
		// dequantized to the storage type as any other type is.
		q8 := true
		for _, l := range ls {
			q8 = q8 && l.W.DType == tensor.Q8_0 && !l.InMajor && l.In%tensor.Q8_0BlockLen == 0
		}
		wi, bi := weightItem{dst: &dst.w}, weightItem{dst: &dst.b}
		hasBias := false
		for _, l := range ls {
			if l.In != dst.in || l.InMajor != dst.inMajor || l.W.Len() != l.In*l.Out || (!l.B.IsZero() && l.B.Len() != l.Out) {
				return fmt.Errorf("cuda: %s: projections of %d×%d (in-major %v) and %d×%d (in-major %v, %d weights, %d biases) cannot be stacked into one GEMM",
					name, ls[0].In, ls[0].Out, ls[0].InMajor, l.In, l.Out, l.InMajor, l.W.Len(), l.B.Len())
			}
			dst.out += l.Out
			hasBias = hasBias || !l.B.IsZero()
			wi.parts, wi.lens = append(wi.parts, l.W), append(wi.lens, l.W.Len())
			bi.parts, bi.lens = append(bi.parts, l.B), append(bi.lens, l.Out)
		}
		// Stacking in×out matrices side by side would interleave their
		// rows; no architecture has more than one (GPT-2's c_attn is
		// already fused).
		if dst.inMajor && len(ls) > 1 {
			return fmt.Errorf("cuda: %s: %d in×out projections cannot be stacked into one GEMM", name, len(ls))
		}
		if q8 {
			wi.q8 = q8Quants
			items = append(items, wi, weightItem{dst: &dst.scales, parts: wi.parts, lens: wi.lens, q8: q8Scales})
		} else {
			items = append(items, wi)
		}
		if hasBias {
			items = append(items, bi)
		}
		return nil
	}
	// A Q8_0 token table (and LM head) stays 8-bit: the tied head is the
	// largest matrix of a small model (Qwen2.5-0.5B's is 136M of its 494M
	// weights).
	table := func(dst, scales *DevicePtr, t tensor.Tensor) {
		if t.DType == tensor.Q8_0 && len(t.Shape) == 2 {
			items = append(items, weightItem{dst: dst, parts: []tensor.Tensor{t}, lens: []int{t.Len()}, q8: q8Quants},
				weightItem{dst: scales, parts: []tensor.Tensor{t}, lens: []int{t.Len()}, q8: q8Scales})
			return
		}
		one(dst, t)
	}
	table(&b.w.embed, &b.w.embedScales, w.Embed)
	if c.LearnedPositions {
		one(&b.w.positions, w.Positions)
	}
	norm(&b.w.final, w.FinalNorm)
	if !w.TiedHead() {
		table(&b.w.lmHead, &b.w.lmHeadScales, w.LMHead)
	}
	if c.Rotary {
		inv := c.InvFreq()
		raw := make([]byte, 8*len(inv))
		for i, f := range inv {
			binary.LittleEndian.PutUint64(raw[8*i:], math.Float64bits(f))
		}
		items = append(items, weightItem{dst: &b.w.invFreq, raw: raw})
	}
	b.w.layers = make([]devLayer, c.Layers)
	for l := range w.Layers {
		lw, dl := &w.Layers[l], &b.w.layers[l]
		norm(&dl.attnNorm, lw.AttnNorm)
		norm(&dl.mlpNorm, lw.MLPNorm)
		if c.QKNorm {
			one(&dl.qNorm, lw.QNorm)
			one(&dl.kNorm, lw.KNorm)
		}
		for _, p := range []struct {
			name string
			dst  *devLinear
			ls   []model.Linear
		}{{"query/key/value", &dl.qkv, lw.QKV}, {"attention output", &dl.o, []model.Linear{lw.O}},
			{"MLP input", &dl.up, lw.Up}, {"MLP output", &dl.down, []model.Linear{lw.Down}}} {
			if err := linear(fmt.Sprintf("layer %d %s projection", l, p.name), p.dst, p.ls); err != nil {
				return nil, err
			}
		}
	}
	return items, nil
}

// uploadWeights puts every parameter in one device allocation (each tensor
// 256-byte aligned, as cuBLAS prefers), in the storage type. A tensor
// already stored in that type (a bfloat16 checkpoint served in bfloat16) is
// copied from its own memory as it is, with no host copy; others are
// converted, and groups stacked, in a staging buffer of the largest such
// tensor's size, so that a large model is never widened or duplicated on
// the host.
func (b *Backend) uploadWeights() error {
	items, err := b.planWeights()
	if err != nil {
		return err
	}
	size := b.dt.size
	offs := make([]int, len(items))
	total := 0
	for i := range items {
		offs[i] = total
		total += align(items[i].bytes(size), 256)
	}
	if b.weights, err = b.drv.MemAlloc(total); err != nil {
		return fmt.Errorf("cuda: weights (%d MiB): %w", total>>20, err)
	}
	for i := range items {
		*items[i].dst = b.weights + DevicePtr(offs[i])
	}
	b.weightBytes = total
	if b.w.lmHead == 0 {
		b.w.lmHead, b.w.lmHeadScales = b.w.embed, b.w.embedScales // tied
	}
	var staging []byte
	for i := range items {
		it := &items[i]
		n := it.bytes(size)
		var src []byte
		switch {
		case it.raw != nil:
			src = it.raw
		case it.q8 != 0:
			if cap(staging) < n {
				staging = make([]byte, n)
			}
			src = staging[:n]
			splitQ8(src, it.parts, it.q8)
		case len(it.parts) == 1 && string(it.parts[0].DType) == b.dt.stored:
			src = it.parts[0].Raw()
		default:
			if cap(staging) < n {
				staging = make([]byte, n)
			}
			src = staging[:n]
			off := 0
			for k, t := range it.parts {
				m := it.lens[k] * size
				if t.IsZero() {
					clear(src[off : off+m])
				} else {
					b.dt.encodeTensor(src[off:off+m], t)
				}
				off += m
			}
		}
		if n == 0 {
			continue
		}
		if err := b.drv.CopyHtoD(*it.dst, unsafe.Pointer(&src[0]), n, b.stream); err != nil {
			return err
		}
		// The staging buffer is rewritten by the next tensor, and a
		// checkpoint's mapping may be closed once NewBackend returns.
		if err := b.drv.StreamSync(b.stream); err != nil {
			return err
		}
		runtime.KeepAlive(src)
	}
	return b.allocDequantScratch()
}
