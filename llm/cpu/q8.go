package cpu

import (
	"github.com/tinyserve/tinyserve/internal/f32"
	"github.com/tinyserve/tinyserve/llm/model"
	"github.com/tinyserve/tinyserve/llm/tensor"
)

// packLinearsQ8 is packLinears for projections of which at least one is
// stored as Q8_0 (K, the shared In, is then a multiple of 32, which Q8_0
// requires along the blocks' dimension). An out×in Q8_0 weight's rows are
// whole blocks along In: each is copied into its column unchanged, so the
// products use exactly the file's weights. Float weights, and an in×out
// Q8_0 weight (blocks along Out, which no GGUF file nor model.Quantize
// produces), are quantized per column with ggml's reference rounding.
func packLinearsQ8(ls []model.Linear, K, N int, hasBias bool) (*f32.Packed, []float32) {
	p := f32.NewPackedQ8(K, N)
	var bias []float32
	if hasBias {
		bias = make([]float32, N)
	}
	rowBytes := K / tensor.Q8_0BlockLen * tensor.Q8_0BlockBytes
	col := make([]float32, K)
	j0 := 0
	for _, l := range ls {
		switch {
		case l.W.DType == tensor.Q8_0 && !l.InMajor:
			blocks := l.W.Q8_0Blocks()
			for j := range l.Out {
				p.FillColumnQ8(j0+j, blocks[j*rowBytes:(j+1)*rowBytes])
			}
		case l.InMajor:
			for j := range l.Out {
				for kk := range K {
					col[kk] = l.W.At(kk*l.Out + j)
				}
				p.FillColumnQuantize(j0+j, col)
			}
		default:
			for j := range l.Out {
				l.W.Float32sInto(col, j*K)
				p.FillColumnQuantize(j0+j, col)
			}
		}
		if !l.B.IsZero() {
			l.B.Float32sInto(bias[j0:j0+l.Out], 0)
		}
		j0 += l.Out
	}
	return p, bias
}
