package gpt2

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// The fixtures in testdata/torch were written by PyTorch itself
// (testdata/torch/make.py): one small random GPT-2 as torch.save writes
// GPT2LMHeadModel's state dict in each format, and safetensors twins that
// hold the same values.
const torchFixtures = "testdata/torch"

// torchDir makes a checkpoint folder from the fixtures' config.json and
// one of their weight files (none if fixture is ""), under the name the
// loader looks for.
func torchDir(t testing.TB, fixture, as string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{"config.json": "config.json"}
	if fixture != "" {
		files[fixture] = as
	}
	for src, dst := range files {
		b, err := os.ReadFile(filepath.Join(torchFixtures, src))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, dst), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func loadTorchFixture(t testing.TB, fixture, as string) *Model {
	t.Helper()
	m, err := Load(torchDir(t, fixture, as))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// TestLoadPyTorchCheckpoints: every torch.save format gives exactly the
// weights of its safetensors twin.
func TestLoadPyTorchCheckpoints(t *testing.T) {
	tests := []struct{ name, bin, twin string }{
		{"zip float32", "zip-f32.bin", "f32.safetensors"},
		{"legacy float32", "legacy-f32.bin", "f32.safetensors"},
		{"pickle protocol 4", "zip-f32-protocol4.bin", "f32.safetensors"},
		{"strided views", "strided-f32.bin", "f32.safetensors"},
		{"zip float16", "zip-f16.bin", "f16.safetensors"},
		{"zip bfloat16", "zip-bf16.bin", "bf16.safetensors"},
		// zip-f32.bin re-packed in torch 2.x's record layout, CRC-32s 0
		// (make.py's torch2_layout; not written by torch 2.x itself).
		{"torch 2.x layout", "zip-torch2-layout.bin", "f32.safetensors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := loadTorchFixture(t, tt.bin, "pytorch_model.bin")
			want := loadTorchFixture(t, tt.twin, "model.safetensors")
			if err := equalWeights(got.Weights, want.Weights); err != nil {
				t.Fatal(err)
			}
			if !got.Weights.TiedHead() {
				t.Error("lm_head.weight was used instead of the tied wte")
			}
		})
	}
	t.Run("sharded", func(t *testing.T) {
		got, err := Load(filepath.Join(torchFixtures, "sharded"))
		if err != nil {
			t.Fatal(err)
		}
		defer got.Close()
		want := loadTorchFixture(t, "f32.safetensors", "model.safetensors")
		if err := equalWeights(got.Weights, want.Weights); err != nil {
			t.Fatal(err)
		}
	})
}

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
			v, err := f.float32s(w.name, w.shape)
			if err != nil {
				t.Fatal(err)
			}
			start := uintptr(unsafe.Pointer(&f.data[0]))
			if p := uintptr(unsafe.Pointer(&v[0])); p < start || p >= start+uintptr(len(f.data)) {
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

// TestPyTorchPreferSafetensors: with both formats in a folder the
// safetensors file is read, as transformers does.
func TestPyTorchPreferSafetensors(t *testing.T) {
	dir := torchDir(t, "f16.safetensors", "model.safetensors")
	broken := []byte("not a checkpoint")
	if err := os.WriteFile(filepath.Join(dir, "pytorch_model.bin"), broken, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Load(dir)
	if err != nil {
		t.Fatalf("the pytorch_model.bin beside model.safetensors was read: %v", err)
	}
	m.Close()
}

// TestPyTorchRefusesCode: a pickle that would run a program when Python
// loads it (evil.bin: os.system through __reduce__, written by torch.save)
// fails to load, naming the function, and nothing is run.
func TestPyTorchRefusesCode(t *testing.T) {
	_, err := Load(torchDir(t, "evil.bin", "pytorch_model.bin"))
	if err == nil || !errors.Is(err, ErrBadCheckpoint) {
		t.Fatalf("err = %v, want a bad checkpoint", err)
	}
	for _, want := range []string{"pytorch_model.bin", "refusing to call posix.system", "nothing in the file is run"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

// rezip rewrites the fixture zip-f32.bin with edit applied to each entry
// (name, method, contents), leaving out the entries edit drops, and adds
// the extra entries (name, contents).
func rezip(t *testing.T, edit func(name string, method *uint16, body []byte) ([]byte, bool), extra ...string) []byte {
	t.Helper()
	src, err := zip.OpenReader(filepath.Join(torchFixtures, "zip-f32.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, f := range src.File {
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		var body bytes.Buffer
		if _, err := body.ReadFrom(r); err != nil {
			t.Fatal(err)
		}
		r.Close()
		method := zip.Store
		b, keep := edit(f.Name, &method, body.Bytes())
		if !keep {
			continue
		}
		out, err := w.CreateHeader(&zip.FileHeader{Name: f.Name, Method: method})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := out.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i+1 < len(extra); i += 2 {
		out, err := w.CreateHeader(&zip.FileHeader{Name: extra[i], Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := out.Write([]byte(extra[i+1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
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

// rezipRaw rewrites the zip archive src entry by entry, edit applied to
// each entry's stored bytes, without reading any entry through
// archive/zip's checksum (zip-torch2-layout.bin's CRC-32s are 0). Every
// entry keeps its header: CRC-32, flags and method.
func rezipRaw(t *testing.T, src []byte, edit func(name string, body []byte) []byte) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(src), int64(len(src)))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, f := range zr.File {
		r, err := f.OpenRaw()
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		body = edit(f.Name, body)
		fh := f.FileHeader
		fh.CompressedSize64, fh.UncompressedSize64 = uint64(len(body)), uint64(len(body))
		out, err := w.CreateRaw(&fh)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := out.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestPyTorchErrors: a damaged checkpoint fails at load with an error that
// names the file and, where there is one, the tensor.
func TestPyTorchErrors(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(torchFixtures, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	zipF32, legacy, torch2 := read("zip-f32.bin"), read("legacy-f32.bin"), read("zip-torch2-layout.bin")
	// zip-f32.bin with one byte of its data.pkl (at byte 64, 3098 bytes)
	// changed: its CRC-32 was written, and is checked.
	damagedPkl := slices.Clone(zipF32)
	damagedPkl[64+1000] ^= 0x40
	// zip-torch2-layout.bin whose directory says archive/data.pkl (its
	// first entry) holds one byte more than it stores: with no CRC-32 to
	// check, its length still is.
	longPkl := slices.Clone(torch2)
	cd := binary.LittleEndian.Uint32(longPkl[len(longPkl)-22+16:]) // the central directory, from the end record
	binary.LittleEndian.PutUint32(longPkl[cd+24:], binary.LittleEndian.Uint32(longPkl[cd+24:])+1)
	// The storage of transformer.h.0.mlp.c_fc.weight in zip-f32.bin, from
	// its pickle (make.py saves the tensors in state-dict order).
	const fcStorage = "zip-f32/data/12"
	unchanged := func(_ string, _ *uint16, b []byte) ([]byte, bool) { return b, true }
	tests := []struct {
		name string
		file []byte
		want []string
	}{
		{"not a checkpoint", []byte("hello"), []string{"not a PyTorch checkpoint"}},
		{"empty", nil, []string{"not a PyTorch checkpoint"}},
		{"legacy protocol 1", []byte("L119547037146038801333356L\n.M\xe9\x03.}q\x00(X"), []string{"legacy format with pickle protocol 0 or 1"}},
		{"truncated zip", zipF32[:len(zipF32)/2], []string{"zip archive", "truncated file?"}},
		{"zip cut near its end", zipF32[:len(zipF32)-10], []string{"zip archive", "truncated file?"}},
		{"truncated legacy", legacy[:len(legacy)-100], []string{`tensor "transformer.`, "past the end of the file", "truncated file?"}},
		{"legacy pickle cut", legacy[:200], []string{"legacy format", "truncated"}},
		{"storage entry missing", rezip(t, func(name string, _ *uint16, b []byte) ([]byte, bool) {
			return b, name != fcStorage
		}), []string{`tensor "transformer.h.0.mlp.c_fc.weight"`, "no entry " + fcStorage}},
		{"storage entry short", rezip(t, func(name string, _ *uint16, b []byte) ([]byte, bool) {
			if name == fcStorage {
				return b[:len(b)-4], true
			}
			return b, true
		}), []string{`tensor "transformer.h.0.mlp.c_fc.weight"`, "need 4096 bytes, its entry holds 4092"}},
		{"storage compressed", rezip(t, func(name string, m *uint16, b []byte) ([]byte, bool) {
			if name == fcStorage {
				*m = zip.Deflate
			}
			return b, true
		}), []string{`tensor "transformer.h.0.mlp.c_fc.weight"`, "compressed"}},
		{"no data.pkl", rezip(t, func(name string, _ *uint16, b []byte) ([]byte, bool) {
			return b, !strings.HasSuffix(name, "data.pkl")
		}), []string{"without <folder>/data.pkl"}},
		{"big-endian", rezip(t, unchanged, "zip-f32/byteorder", "big"), []string{`byte order "big" is not supported`}},
		{"big-endian, torch 2.x layout", rezipRaw(t, torch2, func(name string, b []byte) []byte {
			if name == "archive/byteorder" {
				return []byte("big")
			}
			return b
		}), []string{`byte order "big" is not supported`}},
		{"data.pkl checksum", damagedPkl, []string{"zip-f32/data.pkl", "checksum error"}},
		{"torch 2.x layout, data.pkl short", longPkl, []string{"archive/data.pkl: 3098 bytes, its header says 3099", "unexpected EOF"}},
		{"two pickles", rezip(t, unchanged, "other/data.pkl", "\x80\x02}."), []string{"two pickles"}},
		{"wrong shape", rezip(t, func(name string, _ *uint16, b []byte) ([]byte, bool) {
			if strings.HasSuffix(name, "data.pkl") {
				// (96, 16) -> (16, 96) in wte's size tuple: K 96 K 16 -> K 16 K 96.
				return bytes.Replace(b, []byte("K`K\x10\x86"), []byte("K\x10K`\x86"), 1), true
			}
			return b, true
		}), []string{`tensor "transformer.wte.weight" has shape [16 96], want [96 16]`}},
		{"past its storage", rezip(t, func(name string, _ *uint16, b []byte) ([]byte, bool) {
			if strings.HasSuffix(name, "data.pkl") {
				// wte's storage offset 0 -> 1: its last element is then outside.
				return bytes.Replace(b, []byte("QK\x00K`K\x10\x86"), []byte("QK\x01K`K\x10\x86"), 1), true
			}
			return b, true
		}), []string{`tensor "lm_head.weight"`, "reach past its storage of 1536 elements"}},
		{"negative offset", rezip(t, func(name string, _ *uint16, b []byte) ([]byte, bool) {
			if strings.HasSuffix(name, "data.pkl") {
				// wte's storage offset 0 -> -1 (BININT).
				return bytes.Replace(b, []byte("QK\x00K`K\x10\x86"), []byte("QJ\xff\xff\xff\xffK`K\x10\x86"), 1), true
			}
			return b, true
		}), []string{`tensor "lm_head.weight"`, "negative storage offset -1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := torchDir(t, "", "")
			if err := os.WriteFile(filepath.Join(dir, "pytorch_model.bin"), tt.file, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(dir)
			if err == nil || !errors.Is(err, ErrBadCheckpoint) {
				t.Fatalf("err = %v, want a bad checkpoint", err)
			}
			for _, want := range append(tt.want, "pytorch_model.bin") {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

// TestPyTorchTruncatedLegacyNamesTheByte: in a legacy file cut short, a
// storage whose element count lies past the end is said to be at the byte
// where the whole file has it (the storages before it fix where it starts),
// not at a placeholder offset.
func TestPyTorchTruncatedLegacyNamesTheByte(t *testing.T) {
	legacy, err := os.ReadFile(filepath.Join(torchFixtures, "legacy-f32.bin"))
	if err != nil {
		t.Fatal(err)
	}
	for _, cut := range []int{len(legacy) / 2, len(legacy) - 100} {
		dir := torchDir(t, "", "")
		if err := os.WriteFile(filepath.Join(dir, "pytorch_model.bin"), legacy[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(dir)
		if err == nil {
			t.Fatalf("cut at %d: Load succeeded", cut)
		}
		m := regexp.MustCompile(`at byte (\d+)`).FindStringSubmatch(err.Error())
		if m == nil {
			t.Fatalf("cut at %d: error %q names no byte", cut, err)
		}
		at, _ := strconv.ParseInt(m[1], 10, 64)
		if at < 0 || at+8 > int64(len(legacy)) {
			t.Errorf("cut at %d of %d: error %q names byte %d, outside the whole file", cut, len(legacy), err, at)
		}
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
	small := rezip(t, func(name string, _ *uint16, b []byte) ([]byte, bool) {
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

// TestLoadFormats: vLLM's --load-format values. safetensors and pt read
// only their own files (a broken file of the other kind is never opened,
// and a missing one is an error naming what was looked for); dummy reads
// only config.json and makes random weights of its shape; anything else is
// refused.
func TestLoadFormats(t *testing.T) {
	broken := []byte("not a checkpoint")
	both := torchDir(t, "zip-f32.bin", "pytorch_model.bin")
	f32, err := os.ReadFile(filepath.Join(torchFixtures, "f32.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(both, "model.safetensors"), f32, 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := LoadFormat(both, LoadSafetensors)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	if got, err := LoadFormat(both, LoadPT); err != nil {
		t.Errorf("pt: %v", err)
	} else {
		if err := equalWeights(got.Weights, want.Weights); err != nil {
			t.Errorf("pt read other weights than safetensors: %v", err)
		}
		if !slices.Equal(got.Files, []string{"config.json", "pytorch_model.bin"}) {
			t.Errorf("pt: files %q", got.Files)
		}
		got.Close()
	}

	onlySafe := torchDir(t, "f32.safetensors", "model.safetensors")
	if err := os.WriteFile(filepath.Join(onlySafe, "pytorch_model.bin"), broken, 0o644); err != nil {
		t.Fatal(err)
	}
	if m, err := LoadFormat(onlySafe, LoadSafetensors); err != nil {
		t.Errorf("safetensors beside a broken .bin: %v", err)
	} else {
		m.Close()
	}
	if err := os.Remove(filepath.Join(onlySafe, "pytorch_model.bin")); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFormat(onlySafe, LoadPT); err == nil || !strings.Contains(err.Error(), "none of pytorch_model.bin, pytorch_model.bin.index.json is there") {
		t.Errorf("pt without a .bin: %v", err)
	}

	configOnly := torchDir(t, "", "")
	m, err := LoadFormat(configOnly, LoadDummy)
	if err != nil {
		t.Fatalf("dummy: %v", err)
	}
	defer m.Close()
	if !m.RandomWeights || len(m.Weights.WTE) != m.Config.VocabSize*m.Config.NEmbd || !slices.Equal(m.Files, []string{"config.json"}) || m.Dir != configOnly {
		t.Errorf("dummy: random %v, wte %d, files %q, dir %q", m.RandomWeights, len(m.Weights.WTE), m.Files, m.Dir)
	}
	if _, err := LoadFormat(configOnly, LoadAuto); err == nil {
		t.Error("auto loaded a folder without weights")
	}
	if _, err := LoadFormat(both, "tensorizer"); err == nil || !strings.Contains(err.Error(), "want one of auto, safetensors, pt, dummy") {
		t.Errorf("an unknown format: %v", err)
	}
}
