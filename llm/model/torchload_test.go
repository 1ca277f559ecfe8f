package model

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tinyserve/tinyserve/internal/ziptest"
)

// The fixtures in testdata/torch were written by PyTorch itself
// (testdata/torch/make.py): one small random GPT-2 as torch.save writes
// GPT2LMHeadModel's state dict in each format, and safetensors twins that
// hold the same values.
const torchFixtures = "../checkpoint/testdata/torch"

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
			if err := equalWeights(got, want); err != nil {
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
		if err := equalWeights(got, want); err != nil {
			t.Fatal(err)
		}
	})
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
		{"storage entry missing", ziptest.Rezip(t, filepath.Join(torchFixtures, "zip-f32.bin"), func(name string, _ *uint16, b []byte) ([]byte, bool) {
			return b, name != fcStorage
		}), []string{`tensor "transformer.h.0.mlp.c_fc.weight"`, "no entry " + fcStorage}},
		{"storage entry short", ziptest.Rezip(t, filepath.Join(torchFixtures, "zip-f32.bin"), func(name string, _ *uint16, b []byte) ([]byte, bool) {
			if name == fcStorage {
				return b[:len(b)-4], true
			}
			return b, true
		}), []string{`tensor "transformer.h.0.mlp.c_fc.weight"`, "need 4096 bytes, its entry holds 4092"}},
		{"storage compressed", ziptest.Rezip(t, filepath.Join(torchFixtures, "zip-f32.bin"), func(name string, m *uint16, b []byte) ([]byte, bool) {
			if name == fcStorage {
				*m = zip.Deflate
			}
			return b, true
		}), []string{`tensor "transformer.h.0.mlp.c_fc.weight"`, "compressed"}},
		{"no data.pkl", ziptest.Rezip(t, filepath.Join(torchFixtures, "zip-f32.bin"), func(name string, _ *uint16, b []byte) ([]byte, bool) {
			return b, !strings.HasSuffix(name, "data.pkl")
		}), []string{"without <folder>/data.pkl"}},
		{"big-endian", ziptest.Rezip(t, filepath.Join(torchFixtures, "zip-f32.bin"), unchanged, "zip-f32/byteorder", "big"), []string{`byte order "big" is not supported`}},
		{"big-endian, torch 2.x layout", ziptest.RezipRaw(t, torch2, func(name string, b []byte) []byte {
			if name == "archive/byteorder" {
				return []byte("big")
			}
			return b
		}), []string{`byte order "big" is not supported`}},
		{"data.pkl checksum", damagedPkl, []string{"zip-f32/data.pkl", "checksum error"}},
		{"torch 2.x layout, data.pkl short", longPkl, []string{"archive/data.pkl: 3098 bytes, its header says 3099", "unexpected EOF"}},
		{"two pickles", ziptest.Rezip(t, filepath.Join(torchFixtures, "zip-f32.bin"), unchanged, "other/data.pkl", "\x80\x02}."), []string{"two pickles"}},
		{"wrong shape", ziptest.Rezip(t, filepath.Join(torchFixtures, "zip-f32.bin"), func(name string, _ *uint16, b []byte) ([]byte, bool) {
			if strings.HasSuffix(name, "data.pkl") {
				// (96, 16) -> (16, 96) in wte's size tuple: K 96 K 16 -> K 16 K 96.
				return bytes.Replace(b, []byte("K`K\x10\x86"), []byte("K\x10K`\x86"), 1), true
			}
			return b, true
		}), []string{`tensor "transformer.wte.weight" has shape [16 96], want [96 16]`}},
		{"past its storage", ziptest.Rezip(t, filepath.Join(torchFixtures, "zip-f32.bin"), func(name string, _ *uint16, b []byte) ([]byte, bool) {
			if strings.HasSuffix(name, "data.pkl") {
				// wte's storage offset 0 -> 1: its last element is then outside.
				return bytes.Replace(b, []byte("QK\x00K`K\x10\x86"), []byte("QK\x01K`K\x10\x86"), 1), true
			}
			return b, true
		}), []string{`tensor "lm_head.weight"`, "reach past its storage of 1536 elements"}},
		{"negative offset", ziptest.Rezip(t, filepath.Join(torchFixtures, "zip-f32.bin"), func(name string, _ *uint16, b []byte) ([]byte, bool) {
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
		if err := equalWeights(got, want); err != nil {
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
	if !m.RandomWeights || m.Weights.Embed.Len() != m.Config.VocabSize*m.Config.Hidden || !slices.Equal(m.Files, []string{"config.json"}) || m.Source.Dir != configOnly {
		t.Errorf("dummy: random %v, wte %d, files %q, dir %q", m.RandomWeights, m.Weights.Embed.Len(), m.Files, m.Source.Dir)
	}
	if err := m.Check(); err != nil {
		t.Errorf("dummy: %v", err)
	}
	if _, err := LoadFormat(configOnly, LoadAuto); err == nil {
		t.Error("auto loaded a folder without weights")
	}
	if _, err := LoadFormat(both, "tensorizer"); err == nil || !strings.Contains(err.Error(), "want one of auto, safetensors, pt, dummy") {
		t.Errorf("an unknown format: %v", err)
	}
}
