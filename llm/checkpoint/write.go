package checkpoint

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/tinyserve/tinyserve/llm/tensor"
)

// Named is one tensor to write, under its checkpoint name, converted to
// DType (F32, F16 or BF16; empty keeps the tensor's own type).
type Named struct {
	Name   string
	DType  tensor.DType
	Tensor tensor.Tensor
}

// WriteSafetensors writes tensors contiguously in the given order as a
// safetensors file, with a space-padded header as PyTorch's safetensors
// writer produces. An existing file is replaced.
func WriteSafetensors(path string, ts []Named) error {
	var hdr strings.Builder
	hdr.WriteString(`{"__metadata__":{"format":"pt"}`)
	var off int64
	for i := range ts {
		if ts[i].DType == "" {
			ts[i].DType = ts[i].Tensor.DType
		}
		t := ts[i]
		if t.DType.Size() == 0 {
			return fmt.Errorf("checkpoint: cannot write dtype %s", t.DType)
		}
		size := int64(t.Tensor.Len()) * int64(t.DType.Size())
		shape, _ := json.Marshal(t.Tensor.Shape)
		fmt.Fprintf(&hdr, `,%q:{"dtype":%q,"shape":%s,"data_offsets":[%d,%d]}`, t.Name, t.DType, shape, off, off+size)
		off += size
	}
	hdr.WriteString("}")
	for hdr.Len()%8 != 0 {
		hdr.WriteByte(' ')
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var scratch [8]byte
	binary.LittleEndian.PutUint64(scratch[:], uint64(hdr.Len()))
	w.Write(scratch[:])
	w.WriteString(hdr.String())
	for _, t := range ts {
		for i := range t.Tensor.Len() {
			v := t.Tensor.At(i)
			switch t.DType {
			case tensor.F32:
				binary.LittleEndian.PutUint32(scratch[:], math.Float32bits(v))
				w.Write(scratch[:4])
			case tensor.F16:
				binary.LittleEndian.PutUint16(scratch[:], tensor.F32ToF16(v))
				w.Write(scratch[:2])
			case tensor.BF16:
				binary.LittleEndian.PutUint16(scratch[:], tensor.F32ToBF16(v))
				w.Write(scratch[:2])
			}
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}
