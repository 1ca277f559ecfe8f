package cuda

import (
	"fmt"
	"math"
)

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
	u, from := b.opts.GPUMemoryUtilization, "--gpu-memory-utilization"
	if u == 0 {
		u, from = DefaultGPUMemoryUtilization, "the default"
	}
	budget := int64(float64(free)*u) - activationReserve
	per := b.KVBytesPerBlock(blockSize)
	if budget < per {
		return 0, fmt.Errorf("cuda: %d MiB free on %s leaves no room for one KV block (%d bytes) at utilization %.2f", free>>20, b.deviceName, per, u)
	}
	n := min(budget/per, maxSlots/int64(blockSize))
	// Derived from the free memory at start-up: say how, so that an
	// operator can tell what another utilization would give.
	b.log.Info("cuda KV budget", "free_bytes", free, "gpu_memory_utilization", u, "utilization_from", from,
		"activation_reserve_bytes", activationReserve, "kv_budget_bytes", budget, "blocks", n, "block_size", blockSize)
	return int(n), nil
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
