package main

import (
	"github.com/tinyserve/tinyserve/llm/cpu"
	"github.com/tinyserve/tinyserve/llm/model"
)

// withDType sets the backend's weight storage type ("" keeps float32).
func withDType(o *cpu.Options, dtype string) error {
	o.WeightDType = dtype
	return nil
}

// stepBytes is what a decode step of seqs sequences at context ctx must
// read at least: every matrix of every layer and the LM head in the
// weights' storage type (elem bytes a value: 34/32 for Q8_0), and each sequence's float32
// keys and values in every layer (biases and norms are well under 1%
// more).
func stepBytes(c model.Config, elem float64, seqs, ctx int) float64 {
	up := c.Intermediate
	if c.MLP == model.MLPGated {
		up *= 2
	}
	perLayer := c.Hidden*(c.QDim()+2*c.KVDim()) + c.QDim()*c.Hidden + c.Hidden*up + c.Intermediate*c.Hidden
	weights := elem * float64(c.Layers*perLayer+c.VocabSize*c.Hidden)
	kv := 4 * float64(2*c.Layers*c.KVDim()*ctx*seqs)
	return weights + kv
}
