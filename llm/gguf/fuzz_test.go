package gguf

import (
	"bytes"
	"testing"

	"github.com/tinyserve/tinyserve/llm/tensor"
)

// FuzzParse feeds arbitrary bytes to the header, metadata and tensor-info
// parser: it must never panic nor allocate past what the input can hold,
// and whatever it accepts must keep every tensor inside the data, so that
// Load slices safely. The seed corpus is in testdata/fuzz/FuzzParse (a
// file of every metadata type and tensor type, and small edge cases).
func FuzzParse(f *testing.F) {
	var b bytes.Buffer
	if err := Write(&b, []KV{{"general.alignment", uint32(32)}, {"a", []string{"x", "y"}}, {"n", []any{[]uint8{1}}}},
		[]TensorOut{{Name: "w", Dims: []uint64{32, 2}, Type: tensor.Q8_0, Data: func() tensor.Tensor { return tensor.FromFloat32(make([]float32, 64), 2, 32) }}}); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	f.Add([]byte("GGUF\x03\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := Parse(data)
		if err != nil {
			return
		}
		if g.DataOffset%g.Alignment != 0 {
			t.Fatalf("data offset %d not aligned to %d", g.DataOffset, g.Alignment)
		}
		for i := range g.Tensors {
			ti := &g.Tensors[i]
			if ti.Size > 0 && g.DataOffset+ti.Offset+ti.Size > uint64(len(data)) {
				t.Fatalf("tensor %q ends at %d, past the %d-byte file", ti.Name, g.DataOffset+ti.Offset+ti.Size, len(data))
			}
			if tt, err := g.LoadInfo(ti); err == nil && uint64(tt.Len()) != ti.Elems() {
				t.Fatalf("tensor %q: %d values loaded for %d", ti.Name, tt.Len(), ti.Elems())
			}
		}
		for _, kv := range g.KV {
			_, _ = g.Int(kv.Key)
			_, _ = g.Ints(kv.Key)
		}
	})
}
