package model

import (
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"

	"github.com/tinyserve/tinyserve/llm/tensor"
)

// RandomOptions say how NewRandom draws weights.
type RandomOptions struct {
	// Seed makes the weights: the same seed and config give the same
	// weights on every machine, whatever GOMAXPROCS.
	Seed uint64
	// Std is the standard deviation of the matrices and embeddings; 0
	// means 0.02 (GPT-2's and Qwen's initializer_range).
	Std float64
	// DType is the stored type: F32 (the default) or BF16, which halves
	// the memory of a large built-in model and is what its checkpoint
	// would hold.
	DType tensor.DType
}

// NewRandom generates a model of shape cfg with random weights: matrices
// and embeddings N(0, Std²), biases N(0, 0.02²), norm gains 1 + N(0,
// 0.05²). Each tensor is filled in fixed-size chunks, each from its own PCG
// stream named by the tensor's checkpoint name, so the weights are a pure
// function of the seed and the config. The model is marked RandomWeights.
func NewRandom(name string, cfg Config, o RandomOptions) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if o.Std == 0 {
		o.Std = 0.02
	}
	if o.DType == "" {
		o.DType = tensor.F32
	}
	if o.DType != tensor.F32 && o.DType != tensor.BF16 {
		return nil, fmt.Errorf("model: random weights are float32 or bfloat16, not %s", o.DType)
	}
	m := &Model{Name: name, Config: cfg, RandomWeights: true, Weights: NewWeights(&cfg)}
	type job struct {
		f32        []float32
		bits       []uint16
		mean, sdev float64
		stream     uint64
	}
	const chunk = 1 << 16
	var jobs []job
	for _, p := range params(&cfg, &m.Weights) {
		n := numel(p.shape)
		mean, sdev := 0.0, o.Std
		switch {
		case len(p.shape) == 1 && isNormWeight(p.name):
			mean, sdev = 1, 0.05
		case len(p.shape) == 1:
			sdev = 0.02
		}
		var f32 []float32
		var bits []uint16
		if o.DType == tensor.F32 {
			f32 = make([]float32, n)
			*p.dst = tensor.FromFloat32(f32, p.shape...)
		} else {
			bits = make([]uint16, n)
			*p.dst = tensor.FromBits(tensor.BF16, bits, p.shape...)
		}
		base := uint64(crc32.ChecksumIEEE([]byte(p.name))) << 32
		for i := int64(0); i < n; i += chunk {
			j := job{mean: mean, sdev: sdev, stream: base | uint64(i/chunk)}
			if f32 != nil {
				j.f32 = f32[i:min(n, i+chunk)]
			} else {
				j.bits = bits[i:min(n, i+chunk)]
			}
			jobs = append(jobs, j)
		}
	}
	if cfg.TiedEmbeddings {
		m.Weights.LMHead = m.Weights.Embed
	}
	var wg sync.WaitGroup
	next := make(chan job)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for j := range next {
				r := rand.New(rand.NewPCG(o.Seed, j.stream))
				for i := range j.f32 {
					j.f32[i] = float32(j.mean + j.sdev*r.NormFloat64())
				}
				for i := range j.bits {
					j.bits[i] = tensor.F32ToBF16(float32(j.mean + j.sdev*r.NormFloat64()))
				}
			}
		})
	}
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
	return m, nil
}

// isNormWeight reports whether a parameter is a norm's gain (GPT-2's ln_*,
// the Llama family's *norm.weight), drawn around 1 rather than 0.
func isNormWeight(name string) bool {
	return strings.HasSuffix(name, ".weight") && (strings.Contains(name, "ln_") || strings.Contains(name, "norm"))
}
