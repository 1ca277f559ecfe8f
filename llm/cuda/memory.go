package cuda

import (
	"fmt"
	"math"
	"runtime"
	"unsafe"
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
// aligned, as cuBLAS prefers).
func (b *Backend) uploadWeights() error {
	w := &b.m.Weights
	c := b.cfg
	type item struct {
		dst *DevicePtr
		src []float32
	}
	var items []item
	add := func(dst *DevicePtr, src []float32) { items = append(items, item{dst, src}) }
	add(&b.w.wte, w.WTE)
	add(&b.w.wpe, w.WPE)
	add(&b.w.lnfW, w.LNFW)
	add(&b.w.lnfB, w.LNFB)
	tied := w.TiedHead()
	if !tied {
		add(&b.w.lmHead, w.LMHead)
	}
	if len(w.Layers) != c.NLayer {
		return fmt.Errorf("cuda: model has %d layers of weights, config says %d", len(w.Layers), c.NLayer)
	}
	b.w.layers = make([]devLayer, c.NLayer)
	for l := range w.Layers {
		lw, dl := &w.Layers[l], &b.w.layers[l]
		add(&dl.ln1W, lw.LN1W)
		add(&dl.ln1B, lw.LN1B)
		add(&dl.attnW, lw.AttnW)
		add(&dl.attnB, lw.AttnB)
		add(&dl.attnProjW, lw.AttnProjW)
		add(&dl.attnProjB, lw.AttnProjB)
		add(&dl.ln2W, lw.LN2W)
		add(&dl.ln2B, lw.LN2B)
		add(&dl.fcW, lw.FCW)
		add(&dl.fcB, lw.FCB)
		add(&dl.projW, lw.ProjW)
		add(&dl.projB, lw.ProjB)
	}
	offs := make([]int, len(items))
	total := 0
	for i, it := range items {
		offs[i] = total
		total += align(len(it.src)*b.dt.size, 256)
	}
	host := make([]byte, total)
	for i, it := range items {
		b.dt.encode(host[offs[i]:], it.src)
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
	return 2 * int64(b.cfg.NLayer) * int64(blockSize) * int64(b.cfg.NEmbd) * int64(b.dt.size)
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
