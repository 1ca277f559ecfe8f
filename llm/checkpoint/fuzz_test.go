package checkpoint

import (
	"archive/zip"
	"encoding/binary"
	"errors"
	"math/big"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tinyserve/tinyserve/internal/fuzzseed"
)

// FuzzParseSafetensors feeds arbitrary bytes to the header parser: it must
// never panic, and whatever it accepts must satisfy the invariants the
// loader relies on when it slices the file. The seed corpus is in
// testdata/fuzz/FuzzParseSafetensors.
func FuzzParseSafetensors(f *testing.F) {
	hdr := func(js string, data int) []byte {
		b := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
		return append(append(b, js...), make([]byte, data)...)
	}
	f.Add(hdr(`{"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 8))
	f.Add(hdr(`{"a":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]},"b":{"dtype":"BF16","shape":[],"data_offsets":[8,10]}}`, 10))
	f.Add(hdr(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}}`, 8))
	f.Add(hdr(`{}`, 0))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseSafetensors(b, int64(len(b)))
		if err != nil {
			return
		}
		if h.DataStart < 8 || h.DataStart > int64(len(b)) {
			t.Fatalf("data start %d outside file of %d bytes", h.DataStart, len(b))
		}
		dataLen := int64(len(b)) - h.DataStart
		for name, ti := range h.Tensors {
			if ti.Begin < 0 || ti.End < ti.Begin || ti.End > dataLen {
				t.Fatalf("tensor %q: offsets [%d, %d] outside data of %d bytes", name, ti.Begin, ti.End, dataLen)
			}
			if size, ok := dtypeSizes[ti.DType]; ok {
				n := int64(1)
				for _, d := range ti.Shape {
					n *= d
				}
				if n*size != ti.End-ti.Begin {
					t.Fatalf("tensor %q: %d bytes for shape %v of %s", name, ti.End-ti.Begin, ti.Shape, ti.DType)
				}
			}
			for other, to := range h.Tensors {
				if other != name && ti.Begin < to.End && to.Begin < ti.End {
					t.Fatalf("tensors %q and %q overlap", name, other)
				}
			}
		}
	})
}

// FuzzParseTorch feeds arbitrary bytes to the PyTorch checkpoint reader
// (both torch.save formats and the pickle machine under them): it must
// never panic, and every tensor it accepts must lie inside the file, so
// that reading it (gathering a strided view included) cannot go out of
// bounds. Seeds: small files torch.save wrote (testdata/torch/small-*.bin,
// see make.py there), zip-f32.bin re-packed in torch 2.x's layout
// (zip-torch2-layout.bin: CRC-32s 0, records aligned) and
// testdata/fuzz/FuzzParseTorch.
func FuzzParseTorch(f *testing.F) {
	if fuzzseed.AddFiles(f, "testdata/torch/small-*.bin") == 0 || fuzzseed.AddFiles(f, "testdata/torch/zip-torch2-layout.bin") != 1 {
		f.Fatal("no seed files")
	}
	f.Add([]byte("\x80\x02}q\x00."))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseTorch(b)
		if err != nil {
			return
		}
		for name, ti := range h.Tensors {
			if ti.Begin < 0 || ti.End < ti.Begin || ti.End > int64(len(b)) {
				t.Fatalf("tensor %q: bytes [%d, %d) outside the file of %d", name, ti.Begin, ti.End, len(b))
			}
			es := dtypeSizes[ti.DType]
			n := int64(1)
			for _, d := range ti.Shape {
				n *= d
			}
			raw := b[ti.Begin:ti.End]
			if ti.Stride != nil {
				raw = gather(raw, ti.Shape, ti.Stride, es)
			}
			if int64(len(raw)) != n*es {
				t.Fatalf("tensor %q: %d bytes for shape %v of %s", name, len(raw), ti.Shape, ti.DType)
			}
		}
	})
}

// FuzzUnpickle runs arbitrary bytes on the pickle machine with the hooks a
// state dict is read with: it must never panic or run away, whatever the
// opcodes. Seeds: the pickle of testdata/torch/small-zip.bin, and
// testdata/fuzz/FuzzUnpickle.
func FuzzUnpickle(f *testing.F) {
	zr, err := zip.OpenReader("testdata/torch/small-zip.bin")
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range zr.File {
		if strings.HasSuffix(e.Name, "data.pkl") {
			b, err := readZipEntry(e, 1<<20)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	zr.Close()
	f.Fuzz(func(t *testing.T, b []byte) {
		u := &torchUnpickler{storages: map[string]*torchStorage{}}
		v, end, err := unpickle(b, 0, u.hooks())
		if err != nil {
			return
		}
		if end < 1 || end > len(b) || b[end-1] != opStop {
			t.Fatalf("unpickle ended at %d of %d bytes, not after a STOP", end, len(b))
		}
		_, _ = torchHeader(v, int64(len(b)))
	})
}

// FuzzOpenShards feeds arbitrary bytes as a sharded checkpoint's index
// (model.safetensors.index.json) with a fake shard opener that fails at the
// failAt-th open: it must never panic; an accepted index opens each shard
// it names once, only plain file names in the checkpoint folder, finds every
// tensor of its weight_map in its shard, and releases nothing; a refused one
// releases every shard it opened, once.
func FuzzOpenShards(f *testing.F) {
	f.Add([]byte(`{"metadata":{"total_size":8},"weight_map":{"wte.weight":"model-00001-of-00002.safetensors","h.0.ln_1.weight":"model-00002-of-00002.safetensors","wpe.weight":"model-00001-of-00002.safetensors"}}`), uint8(0))
	f.Add([]byte(`{"weight_map":{"a":"x.safetensors","b":"y.safetensors","c":"z.safetensors"}}`), uint8(3))
	f.Add([]byte(`{"weight_map":{"a":"../x.safetensors"}}`), uint8(0))
	f.Add([]byte(`{"weight_map":{"a":"ok.safetensors","b":".."}}`), uint8(0))
	f.Add([]byte(`{"weight_map":{}}`), uint8(0))
	f.Add([]byte(`{"weight_map":{"a":1}}`), uint8(0))
	dir := filepath.Join(string(filepath.Separator), "ckpt")
	f.Fuzz(func(t *testing.T, data []byte, failAt uint8) {
		opened := map[string]int{}
		released := map[string]int{}
		failed := "" // the shard whose open failed: nothing to release
		open := func(p string) (*stFile, error) {
			if filepath.Dir(p) != dir {
				t.Fatalf("opened %q, not a file of %q", p, dir)
			}
			opened[p]++
			if len(opened) == int(failAt) {
				failed = p
				return nil, errors.New("open failed")
			}
			return &stFile{path: p, release: func() error { released[p]++; return nil }}, nil
		}
		cf, err := openShards(dir, filepath.Join(dir, "model.safetensors.index.json"), data, open)
		for p, n := range opened {
			if n != 1 {
				t.Fatalf("opened %q %d times", p, n)
			}
		}
		if err != nil {
			if !errors.Is(err, ErrBad) && err.Error() != "open failed" {
				t.Fatalf("error %v is neither ErrBad nor the opener's", err)
			}
			for p := range opened {
				if want := map[bool]int{true: 0, false: 1}[p == failed]; released[p] != want {
					t.Fatalf("refused index: %q opened and released %d times, want %d", p, released[p], want)
				}
			}
			return
		}
		if len(released) != 0 || failed != "" {
			t.Fatalf("accepted index released %v", released)
		}
		if len(cf.weights) == 0 {
			t.Fatal("accepted an index without weights")
		}
		for name, file := range cf.weights {
			sf, ok := cf.file(name)
			if !ok || sf == nil || sf.path != filepath.Join(dir, file) {
				t.Fatalf("tensor %q of shard %q: file gives %v, %v", name, file, sf, ok)
			}
		}
		if len(cf.files) != len(opened) {
			t.Fatalf("%d shards kept, %d opened", len(cf.files), len(opened))
		}
	})
}

// FuzzDecodeLong: decodeLong reads a pickle LONG1/LONG4 payload, a
// little-endian two's-complement integer, as that integer (checked against
// math/big), an int64 exactly when it fits.
func FuzzDecodeLong(f *testing.F) {
	for _, b := range [][]byte{{}, {0xff}, {0x80}, {0x7f}, {0, 0x80}, {1, 2, 3, 4, 5, 6, 7, 0x80}, {0, 0, 0, 0, 0, 0, 0, 0x80, 0xff}, {0, 0, 0, 0, 0, 0, 0, 0x80, 0}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want := new(big.Int)
		for i := len(b) - 1; i >= 0; i-- {
			want.Lsh(want, 8).Or(want, big.NewInt(int64(b[i])))
		}
		if len(b) > 0 && b[len(b)-1]&0x80 != 0 {
			want.Sub(want, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
		}
		switch got := decodeLong(b).(type) {
		case int64:
			if !want.IsInt64() || got != want.Int64() {
				t.Fatalf("decodeLong(%x) = %d, want %v", b, got, want)
			}
		case *big.Int:
			if want.IsInt64() || got.Cmp(want) != 0 {
				t.Fatalf("decodeLong(%x) = big %v, want %v (an int64 when it fits)", b, got, want)
			}
		default:
			t.Fatalf("decodeLong(%x) = %T", b, got)
		}
	})
}
