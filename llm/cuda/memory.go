package cuda

import (
	"fmt"
	"math"
	"runtime"
	"unsafe"

	"github.com/tinyserve/tinyserve/llm/tensor"
)

// devWeights are device addresses of the uploaded parameters.
type devWeights struct {
	wte, wpe, lnfW, lnfB, lmHead DevicePtr
	layers                       []devLayer
}

type devLayer struct {
	ln1W, ln1B, attnW, attnB, attnProjW, attnProjB DevicePtr
	ln2W, ln2B, fcW, fcB, projW, projB             DevicePtr
}

// uploadWeights converts every parameter to the storage type into one host
// buffer and copies it to one device allocation (each tensor 256-byte
// aligned, as cuBLAS prefers). A tensor already stored in the storage type
// (a bfloat16 checkpoint served in bfloat16) is copied as it is.
func (b *Backend) uploadWeights() error {
	w := &b.m.Weights
	c := b.cfg
	type item struct {
		dst *DevicePtr
		src tensor.Tensor
	}
	var items []item
	add := func(dst *DevicePtr, src tensor.Tensor) { items = append(items, item{dst, src}) }
	add(&b.w.wte, w.Embed)
	add(&b.w.wpe, w.Positions)
	add(&b.w.lnfW, w.FinalNorm.W)
	add(&b.w.lnfB, w.FinalNorm.B)
	tied := w.TiedHead()
	if !tied {
		add(&b.w.lmHead, w.LMHead)
	}
	if len(w.Layers) != c.Layers {
		return fmt.Errorf("cuda: model has %d layers of weights, config says %d", len(w.Layers), c.Layers)
	}
	b.w.layers = make([]devLayer, c.Layers)
	for l := range w.Layers {
		lw, dl := &w.Layers[l], &b.w.layers[l]
		add(&dl.ln1W, lw.AttnNorm.W)
		add(&dl.ln1B, lw.AttnNorm.B)
		add(&dl.attnW, lw.QKV[0].W)
		add(&dl.attnB, lw.QKV[0].B)
		add(&dl.attnProjW, lw.O.W)
		add(&dl.attnProjB, lw.O.B)
		add(&dl.ln2W, lw.MLPNorm.W)
		add(&dl.ln2B, lw.MLPNorm.B)
		add(&dl.fcW, lw.Up[0].W)
		add(&dl.fcB, lw.Up[0].B)
		add(&dl.projW, lw.Down.W)
		add(&dl.projB, lw.Down.B)
	}
	offs := make([]int, len(items))
	total := 0
	for i, it := range items {
		offs[i] = total
		total += align(it.src.Len()*b.dt.size, 256)
	}
	host := make([]byte, total)
	for i, it := range items {
		b.dt.encodeTensor(host[offs[i]:], it.src)
	}
	var err error
	if b.weights, err = b.drv.MemAlloc(total); err != nil {
		return fmt.Errorf("cuda: weights (%d MiB): %w", total>>20, err)
	}
	for i, it := range items {
		*it.dst = b.weights + DevicePtr(offs[i])
	}
	if tied {
		b.w.lmHead = b.w.wte
	}
	if err := b.drv.CopyHtoD(b.weights, unsafe.Pointer(&host[0]), total, b.stream); err != nil {
		return err
	}
	err = b.drv.StreamSync(b.stream)
	runtime.KeepAlive(host)
	return err
}

func align(n, a int) int { return (n + a - 1) / a * a }

// KVBytesPerBlock is the device memory one KV block of blockSize tokens
// takes: keys and values of every layer in the storage type.
func (b *Backend) KVBytesPerBlock(blockSize int) int64 {
	return b.cfg.KVBytesPerToken(b.dt.size) * int64(blockSize)
}

// MaxKVBlocks implements engine.Backend: Options.NumBlocks when set, else
// how many blocks fit in GPUMemoryUtilization of the free memory (less a
// reserve for the per-step buffers).
func (b *Backend) MaxKVBlocks(blockSize int) (int, error) {
	if blockSize < 1 {
		return 0, fmt.Errorf("cuda: block size must be positive, got %d", blockSize)
	}
	if b.opts.NumBlocks > 0 {
		return b.opts.NumBlocks, nil
	}
	done, err := b.enter()
	defer done()
	if err != nil {
		return 0, err
	}
	free, _, err := b.drv.MemInfo()
	if err != nil {
		return 0, err
	}
	u := b.opts.GPUMemoryUtilization
	if u == 0 {
		u = DefaultGPUMemoryUtilization
	}
	budget := int64(float64(free)*u) - activationReserve
	per := b.KVBytesPerBlock(blockSize)
	if budget < per {
		return 0, fmt.Errorf("cuda: %d MiB free on %s leaves no room for one KV block (%d bytes) at utilization %.2f", free>>20, b.deviceName, per, u)
	}
	return int(min(budget/per, maxSlots/int64(blockSize))), nil
}

// maxSlots bounds a KV cache's slots (blocks times block size): the
// kernels index slots with 32-bit ints.
const maxSlots = math.MaxInt32

// AllocateKV implements engine.Backend: one allocation for the keys and
// one for the values of every layer, for exactly numBlocks blocks.
func (b *Backend) AllocateKV(numBlocks, blockSize int) error {
	if numBlocks < 1 || blockSize < 1 {
		return fmt.Errorf("cuda: AllocateKV(%d, %d): both must be positive", numBlocks, blockSize)
	}
	if int64(numBlocks)*int64(blockSize) > maxSlots {
		return fmt.Errorf("cuda: AllocateKV(%d, %d): over the %d cache slots the kernels can index", numBlocks, blockSize, maxSlots)
	}
	done, err := b.enter()
	defer done()
	if err != nil {
		return err
	}
	_ = b.drv.StreamSync(b.stream)
	b.dropGraphs() // they hold the old cache's addresses
	b.drv.MemFree(b.kc)
	b.drv.MemFree(b.vc)
	b.kc, b.vc = 0, 0
	half := b.KVBytesPerBlock(blockSize) / 2 * int64(numBlocks)
	if b.kc, err = b.drv.MemAlloc(int(half)); err != nil {
		return fmt.Errorf("cuda: KV cache keys (%d blocks, %d MiB): %w", numBlocks, half>>20, err)
	}
	if b.vc, err = b.drv.MemAlloc(int(half)); err != nil {
		b.drv.MemFree(b.kc)
		b.kc = 0
		return fmt.Errorf("cuda: KV cache values (%d blocks, %d MiB): %w", numBlocks, half>>20, err)
	}
	b.numBlocks, b.blockSize = numBlocks, blockSize
	return nil
}
