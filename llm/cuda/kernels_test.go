package cuda

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestKernelSourceEmbedded(t *testing.T) {
	src := KernelSource()
	if len(src) < 1000 {
		t.Fatalf("embedded source is %d bytes", len(src))
	}
	if strings.Contains(src, "#include") {
		t.Error("kernels include headers; NVRTC without the toolkit's headers cannot compile them")
	}
	for _, sfx := range []string{"f32", "f16", "bf16"} {
		for _, k := range templateKernels {
			if !strings.Contains(src, k+"_##SUF(") || !strings.Contains(src, "TS_INSTANTIATE(") {
				t.Errorf("kernel %s is not instantiated", k)
			}
		}
		if !regexp.MustCompile(`TS_INSTANTIATE\(\w+, ` + sfx + `\)`).MatchString(src) {
			t.Errorf("no %s instantiation", sfx)
		}
	}
	if !strings.Contains(src, `extern "C" __global__ void argmax_rows(`) {
		t.Error("argmax_rows missing")
	}
}

func TestCacheKey(t *testing.T) {
	k := CacheKey("src", 90, "nvrtc-12.4")
	if k != CacheKey("src", 90, "nvrtc-12.4") {
		t.Error("CacheKey is not deterministic")
	}
	if k == CacheKey("src", 89, "nvrtc-12.4") || k == CacheKey("src2", 90, "nvrtc-12.4") || k == CacheKey("src", 90, "nvrtc-13.0") {
		t.Error("CacheKey ignores the arch, the source or the compiler")
	}
	if !strings.HasSuffix(k, "-sm_90") || strings.ContainsAny(k, "/ ") {
		t.Errorf("CacheKey %q is not a plain file name ending in the arch", k)
	}
}

// TestKernelImageFromCache: a cached image is used without compiling (the
// build's NVRTC has no compile function bound), and dropCached removes it.
func TestKernelImageFromCache(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	build := func(src string, arch int) kernelBuild {
		k, err := newKernelBuild(fakeNVRTC(), src, arch, dir, log)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	want := []byte("cubin bytes")
	if err := writeCache(dir, CacheKey("src", 80, fakeNVRTCVersion)+".cubin", want); err != nil {
		t.Fatal(err)
	}
	got, err := build("src", 80).image()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("image() = %q, %v", got, err)
	}
	ptx := []byte("ptx\x00")
	if err := writeCache(dir, CacheKey("src", 120, fakeNVRTCVersion)+".ptx", ptx); err != nil {
		t.Fatal(err)
	}
	if got, err := build("src", 120).image(); err != nil || !bytes.Equal(got, ptx) {
		t.Fatalf("ptx from cache = %q, %v", got, err)
	}
	build("src", 80).dropCached()
	if _, err := os.Stat(filepath.Join(dir, CacheKey("src", 80, fakeNVRTCVersion)+".cubin")); !os.IsNotExist(err) {
		t.Errorf("dropCached left the image (%v)", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

// kernelNames lists every kernel the backend looks up, for each storage
// type: what the NVRTC test expects in the compiled module and what the
// host emulator registers.
func kernelNames() []string {
	var names []string
	for _, sfx := range []string{"_f32", "_f16", "_bf16"} {
		for _, k := range templateKernels {
			names = append(names, k+sfx)
		}
	}
	return append(names, "argmax_rows", "hold_ns")
}

// templateKernels are the kernels instantiated per storage type.
var templateKernels = []string{"embed", "norm", "add_norm", "qkv_store", "attention", "attention_split", "attention_combine", "flash_prefill", "bias_act", "silu_mul", "residual",
	"embed_q8", "q8_gemv1", "q8_gemv2", "q8_gemv4", "q8_gemv8", "q8_dequant"}
