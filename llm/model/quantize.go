package model

import (
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/tinyserve/tinyserve/llm/tensor"
)

// Quantization names accepted by Quantize, as vLLM's --quantization flag
// spells them.
const (
	// QuantNone keeps the checkpoint's types ("" means the same).
	QuantNone = "none"
	// QuantQ8_0 stores the matrices as ggml's Q8_0 (tensor.Q8_0).
	QuantQ8_0 = "q8_0"
)

// ParseQuantization checks a --quantization value, case-insensitively,
// and returns its canonical name: "" for none, else QuantQ8_0.
func ParseQuantization(s string) (string, error) {
	switch strings.ToLower(s) {
	case "", QuantNone:
		return "", nil
	case QuantQ8_0:
		return QuantQ8_0, nil
	}
	return "", fmt.Errorf("quantization %q: want %q or %q", s, QuantNone, QuantQ8_0)
}

// Quantize converts m's matrices to the quantization q (see
// ParseQuantization; "" leaves m as it is), backend-neutrally, as
// llama.cpp's converter does for a Q8_0 GGUF file: every projection of
// every block, and the token embedding, whose tied LM head stays the same
// tensor (an untied LM head is quantized as well). Norms, biases and
// GPT-2's position embedding stay float: they are small, and a norm's
// gain is not a product's weight. A backend dequantizes an embedding row
// when it looks a token up. Matrices already stored as Q8_0 are kept as
// they are; one whose blocks' dimension (its input) is not a multiple of
// 32 is an error naming it. GPT-2's in×out (Conv1D) weights become out×in,
// so that the blocks run along the input as ggml's do.
//
// The quantized tensors are new heap memory; the model's old ones (perhaps
// a mapping of the checkpoint) are no longer referenced by m.Weights but
// stay mapped until Close.
func (m *Model) Quantize(q string) error {
	q, err := ParseQuantization(q)
	if err != nil || q == "" {
		return err
	}
	w := &m.Weights
	tied := w.TiedHead()
	var jobs []func() error
	for i := range w.Layers {
		l := &w.Layers[i]
		lins := append(append([]*Linear{}, ptrs(l.QKV)...), &l.O, &l.Down)
		lins = append(lins, ptrs(l.Up)...)
		for k, lin := range lins {
			jobs = append(jobs, func() error {
				if err := quantizeLinear(lin); err != nil {
					return fmt.Errorf("model: quantize layer %d matrix %d: %w", i, k, err)
				}
				return nil
			})
		}
	}
	jobs = append(jobs, func() error {
		e, err := quantizeRows(w.Embed)
		if err != nil {
			return fmt.Errorf("model: quantize the token embedding: %w", err)
		}
		w.Embed = e
		if tied {
			w.LMHead = e
		}
		return nil
	})
	if !tied {
		jobs = append(jobs, func() error {
			h, err := quantizeRows(w.LMHead)
			if err != nil {
				return fmt.Errorf("model: quantize the LM head: %w", err)
			}
			w.LMHead = h
			return nil
		})
	}
	return runJobs(jobs)
}

func ptrs(ls []Linear) []*Linear {
	out := make([]*Linear, len(ls))
	for i := range ls {
		out[i] = &ls[i]
	}
	return out
}

// quantizeLinear stores l's weight as Q8_0 [Out, In].
func quantizeLinear(l *Linear) error {
	if l.W.DType == tensor.Q8_0 && !l.InMajor {
		return nil
	}
	if l.In%tensor.Q8_0BlockLen != 0 {
		return fmt.Errorf("input dimension %d is not a multiple of %d", l.In, tensor.Q8_0BlockLen)
	}
	v := l.W.Float32s()
	if l.InMajor {
		t := make([]float32, len(v))
		for k := range l.In {
			for j := range l.Out {
				t[j*l.In+k] = v[k*l.Out+j]
			}
		}
		v = t
	}
	q, err := tensor.QuantizeQ8_0(v, int64(l.Out), int64(l.In))
	if err != nil {
		return err
	}
	l.W, l.InMajor = q, false
	return nil
}

// quantizeRows quantizes a [rows, Hidden] table along its rows, a row at
// a time: a bfloat16 vocabulary of 151936×896 is not widened whole.
func quantizeRows(t tensor.Tensor) (tensor.Tensor, error) {
	if t.DType == tensor.Q8_0 {
		return t, nil
	}
	if len(t.Shape) != 2 || t.Shape[1]%tensor.Q8_0BlockLen != 0 {
		return tensor.Tensor{}, fmt.Errorf("shape %v: want [rows, a multiple of %d]", t.Shape, tensor.Q8_0BlockLen)
	}
	rows, cols := int(t.Shape[0]), int(t.Shape[1])
	rowBytes := cols / tensor.Q8_0BlockLen * tensor.Q8_0BlockBytes
	out := make([]byte, 0, rows*rowBytes)
	row := make([]float32, cols)
	for r := range rows {
		t.Float32sInto(row, r*cols)
		q, err := tensor.QuantizeQ8_0(row, int64(cols))
		if err != nil {
			return tensor.Tensor{}, err
		}
		out = append(out, q.Q8_0Blocks()...)
	}
	return tensor.FromQ8_0(out, t.Shape...)
}

// runJobs runs jobs on GOMAXPROCS goroutines and returns the first error:
// quantizing a 0.5B model is a few seconds of one core.
func runJobs(jobs []func() error) error {
	errs := make([]error, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := range next {
				errs[i] = jobs[i]()
			}
		})
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
