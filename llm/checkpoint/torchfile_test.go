package checkpoint

import (
	"archive/zip"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/tinyserve/tinyserve/internal/ziptest"
)

// The fixtures in testdata/torch were written by PyTorch itself
// (testdata/torch/make.py): one small random GPT-2 as torch.save writes
// GPT2LMHeadModel's state dict in each format, and safetensors twins that
// hold the same values.
const torchFixtures = "testdata/torch"

// TestPyTorchFloat32InPlace: float32 storages of a zip checkpoint are used
// from the file's mapping, as safetensors tensors are, not copied, in
// torch 1.13's layout and in torch 2.x's.
func TestPyTorchFloat32InPlace(t *testing.T) {
	for _, name := range []string{"zip-f32.bin", "zip-torch2-layout.bin"} {
		f, err := openTorch(filepath.Join(torchFixtures, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.close()
		for _, w := range []struct {
			name  string
			shape []int64
		}{{"transformer.wte.weight", []int64{96, 16}}, {"transformer.h.1.mlp.c_proj.weight", []int64{64, 16}}} {
			v, err := f.tensor(w.name, w.shape)
			if err != nil {
				t.Fatal(err)
			}
			start := uintptr(unsafe.Pointer(&f.data[0]))
			if p := uintptr(unsafe.Pointer(&v.Raw()[0])); p < start || p >= start+uintptr(len(f.data)) {
				t.Errorf("%s: %s was copied out of the mapped file", name, w.name)
			}
		}
	}
	// A strided view cannot alias: its values are gathered.
	g, err := openTorch(filepath.Join(torchFixtures, "strided-f32.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.close()
	if ti := g.header.Tensors["transformer.h.0.mlp.c_fc.weight"]; ti.Stride == nil {
		t.Fatalf("the transposed view was read as contiguous: %+v", ti)
	}
}

// TestPyTorch2Layout checks that zip-torch2-layout.bin (make.py's
// torch2_layout) is what the loader's torch 2.x tests take it for: the
// records torch 2.x writes, in its order, in the folder "archive", each
// with a data descriptor and CRC-32 0 (compute_crc32=False), each
// record's data at a multiple of 64 bytes; and that the loader reads its
// data.pkl as the very pickle of zip-f32.bin, from which it was made.
func TestPyTorch2Layout(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(torchFixtures, "zip-torch2-layout.bin"))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"data.pkl", ".format_version", ".storage_alignment", "byteorder"}
	for i := range 32 {
		want = append(want, fmt.Sprintf("data/%d", i))
	}
	want = append(want, "version", ".data/serialization_id")
	var names []string
	for _, f := range zr.File {
		names = append(names, strings.TrimPrefix(f.Name, "archive/"))
		off, err := f.DataOffset()
		if err != nil {
			t.Fatal(err)
		}
		if f.CRC32 != 0 || f.Flags&0x8 == 0 || f.Method != zip.Store || off%64 != 0 {
			t.Errorf("%s: CRC-32 %#x, flags %#x, method %d, data at %d; want CRC-32 0, a data descriptor (flag 0x8), stored, at a multiple of 64",
				f.Name, f.CRC32, f.Flags, f.Method, off)
		}
	}
	if !slices.Equal(names, want) || !strings.HasPrefix(zr.File[0].Name, "archive/") {
		t.Errorf("records %q, want %q in archive/", names, want)
	}
	bodies := map[string]string{"archive/.format_version": "1", "archive/.storage_alignment": "64", "archive/byteorder": "little", "archive/version": "3\n"}
	for _, f := range zr.File {
		if want, ok := bodies[f.Name]; ok {
			got, err := readZipEntry(f, 100)
			if err != nil || string(got) != want {
				t.Errorf("%s: %q, %v; want %q", f.Name, got, err, want)
			}
		}
	}
	old, err := zip.OpenReader(filepath.Join(torchFixtures, "zip-f32.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	want1, err := readZipEntry(old.File[0], 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readZipEntry(zr.File[0], 1<<20)
	if err != nil || !bytes.Equal(got, want1) {
		t.Fatalf("archive/data.pkl: %d bytes, %v; want zip-f32/data.pkl's %d bytes", len(got), err, len(want1))
	}
}

// TestPyTorchEmptyViews: torch checks no storage offset of an empty
// tensor, so torch.save writes (and torch.load reads) empty views whose
// offset lies past their storage, 2**61 elements even (empty-views.bin,
// see make.py). They are accepted, and their byte range is an empty one
// inside the file, as for every tensor.
func TestPyTorchEmptyViews(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(torchFixtures, "empty-views.bin"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := parseTorch(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"far", "huge"} {
		ti := h.Tensors[name]
		if ti.Begin != ti.End || ti.Begin < 0 || ti.End > int64(len(b)) {
			t.Errorf("empty tensor %q: bytes [%d, %d), want an empty range inside the file of %d", name, ti.Begin, ti.End, len(b))
		}
	}
	if ti := h.Tensors["one"]; ti.End-ti.Begin != 8 {
		t.Errorf("tensor \"one\": %+v", ti)
	}
}

// TestPyTorchExpandedView: a view with strides 0 may name far more
// elements than its storage holds. expanded.bin (make.py), 750 bytes that
// torch.save wrote, holds one element expanded to a 2**20 x 2**20 matrix:
// gathered, 4 TiB. It is refused when the file is read, before anything
// is allocated, rather than read into a copy the size of its shape.
func TestPyTorchExpandedView(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(torchFixtures, "expanded.bin"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := parseTorch(b)
	if err == nil {
		t.Fatalf("accepted: %+v", h.Tensors["w"])
	}
	for _, want := range []string{`tensor "w"`, "size [1048576 1048576] and stride [0 0]", "more than the whole file of 750 bytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	// A small expanded view (no fixture holds one) is still read.
	small := ziptest.Rezip(t, filepath.Join(torchFixtures, "zip-f32.bin"), func(name string, _ *uint16, b []byte) ([]byte, bool) {
		if strings.HasSuffix(name, "data.pkl") {
			// wte (96, 16) with strides (16, 1) -> (0, 1): every row is row 0.
			return bytes.Replace(b, []byte("K`K\x10\x86q\tK\x10K\x01"), []byte("K`K\x10\x86q\tK\x00K\x01"), 1), true
		}
		return b, true
	})
	h, err = parseTorch(small)
	if err != nil {
		t.Fatal(err)
	}
	ti := h.Tensors["transformer.wte.weight"]
	if !slices.Equal(ti.Stride, []int64{0, 1}) {
		t.Fatalf("wte: %+v, want strides [0 1]", ti)
	}
	rows := gather(small[ti.Begin:ti.End], ti.Shape, ti.Stride, 4)
	if len(rows) != 96*16*4 || !bytes.Equal(rows[:64], small[ti.Begin:ti.Begin+64]) || !bytes.Equal(rows[95*64:], rows[:64]) {
		t.Fatalf("wte gathered as %d bytes, not row 0 96 times", len(rows))
	}
}

// TestPyTorchLegacyPickleBound: the legacy format's pickles lie inline in
// the file, unlike the zip format's data.pkl (at most 100 MB); each is held
// to the same bound, so a hostile file of gigabytes of opcodes is refused
// rather than run. The bound is lowered here to below legacy-f32.bin's
// state dict pickle.
func TestPyTorchLegacyPickleBound(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(torchFixtures, "legacy-f32.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer func(n int) { pickleMaxBytes = n }(pickleMaxBytes)
	pickleMaxBytes = 1000
	_, err = parseTorch(b)
	if err == nil || !strings.Contains(err.Error(), "pickle longer than the 1000-byte") {
		t.Fatalf("err = %v, want the pickle's length refused", err)
	}
}
