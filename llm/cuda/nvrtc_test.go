package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// loadTestNVRTC opens NVRTC where one is installed (no GPU is needed to
// compile), or skips. $TINYSERVE_CUDA_LIB_DIR may point at a folder holding
// just libnvrtc.so.* and its builtins library.
func loadTestNVRTC(t *testing.T) *NVRTC {
	t.Helper()
	rtc, err := LoadNVRTC(LibNVRTC(), SearchDirs(LibDirFromEnv(), nil))
	if err != nil {
		var nf *NotFoundError
		if errors.As(err, &nf) {
			t.Skipf("NVRTC not installed (set %s to a folder with libnvrtc.so.*): %v", EnvLibDir, err)
		}
		t.Fatal(err)
	}
	ma, mi, err := rtc.Version()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("NVRTC %d.%d from %s", ma, mi, rtc.Path)
	return rtc
}

// TestKernelsCompile compiles the embedded kernels with NVRTC, as
// NewBackend does, for every architecture this NVRTC supports from sm_70
// on (cubin) and to PTX, and checks that every kernel the backend looks up
// is in the output.
func TestKernelsCompile(t *testing.T) {
	rtc := loadTestNVRTC(t)
	archs, err := rtc.SupportedArchs()
	if err != nil {
		t.Fatal(err)
	}
	names := kernelNames()
	compiled := 0
	for _, arch := range archs {
		if arch < 70 || (testing.Short() && arch != 80) {
			continue
		}
		img, err := rtc.Compile(KernelSource(), kernelFile, []string{fmt.Sprintf("--gpu-architecture=sm_%d", arch), "-default-device", "--std=c++17"}, true)
		if err != nil {
			t.Fatalf("sm_%d: %v", arch, err)
		}
		if !bytes.HasPrefix(img, []byte("\x7fELF")) {
			t.Errorf("sm_%d: cubin is not an ELF file", arch)
		}
		for _, n := range names {
			if !bytes.Contains(img, []byte(n)) {
				t.Errorf("sm_%d: cubin lacks kernel %s", arch, n)
			}
		}
		compiled++
	}
	if compiled == 0 {
		t.Fatalf("no architecture from sm_70 on among %v", archs)
	}
	ptx, err := rtc.Compile(KernelSource(), kernelFile, []string{"--gpu-architecture=compute_80", "-default-device", "--std=c++17"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if ptx[len(ptx)-1] != 0 {
		t.Error("PTX is not NUL-terminated (cuModuleLoadData needs it)")
	}
	for _, n := range names {
		if !bytes.Contains(ptx, []byte(".entry "+n+"(")) {
			t.Errorf("PTX lacks .entry %s", n)
		}
	}
	t.Logf("compiled for %d architectures; PTX %d bytes", compiled, len(ptx))
}

// TestKernelImageCompilesAndCaches: kernelBuild.image compiles on a cache miss,
// writes the cache, and a broken source reports NVRTC's log.
func TestKernelImageCompilesAndCaches(t *testing.T) {
	rtc := loadTestNVRTC(t)
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	build, err := newKernelBuild(rtc, KernelSource(), 80, dir, log)
	if err != nil {
		t.Fatal(err)
	}
	img, err := build.image()
	if err != nil {
		t.Fatal(err)
	}
	cached, err := os.ReadFile(filepath.Join(dir, build.key()+".cubin"))
	if err != nil || !bytes.Equal(cached, img) {
		t.Fatalf("cache not written: %v", err)
	}
	if major, _, _ := rtc.Version(); !strings.HasPrefix(build.compiler, fmt.Sprintf("nvrtc-%d.", major)) {
		t.Errorf("compiler %q is not NVRTC's version", build.compiler)
	}
	build.src = "extern \"C\" __global__ void k() { undefined_thing(); }"
	_, err = build.image()
	var ce *CompileError
	if !errors.As(err, &ce) || !strings.Contains(ce.Log, "undefined_thing") {
		t.Fatalf("broken source: %v", err)
	}
	t.Logf("compile error as a user sees it: %v", err)
}

// TestPTXFallbackArch: a GPU newer than NVRTC gets PTX for the newest
// architecture NVRTC knows.
func TestPTXFallbackArch(t *testing.T) {
	rtc := loadTestNVRTC(t)
	archs, _ := rtc.SupportedArchs()
	newest := archs[len(archs)-1]
	got, err := ptxFallbackArch(rtc, 999)
	if err != nil || got != newest {
		t.Errorf("ptxFallbackArch(999) = %d, %v; want %d", got, err, newest)
	}
	if _, err := ptxFallbackArch(rtc, 10); err == nil {
		t.Error("sm_10 got a fallback")
	}
}

// TestKernelsNoSpills asks ptxas (through NVRTC) for each kernel's
// resources on Ampere and Hopper: no kernel may spill registers to local
// memory, and each is listed. The register counts are logged.
func TestKernelsNoSpills(t *testing.T) {
	rtc := loadTestNVRTC(t)
	archs, err := rtc.SupportedArchs()
	if err != nil {
		t.Fatal(err)
	}
	entry := regexp.MustCompile(`Compiling entry function '(\w+)'`)
	spills := regexp.MustCompile(`(\d+) bytes spill stores, (\d+) bytes spill loads`)
	regs := regexp.MustCompile(`Used (\d+) registers`)
	for _, arch := range []int{80, 90} {
		if !slices.Contains(archs, arch) {
			continue
		}
		_, log, err := rtc.compile(KernelSource(), kernelFile, []string{fmt.Sprintf("--gpu-architecture=sm_%d", arch), "-default-device", "--std=c++17", "--ptxas-options=-v"}, true)
		if err != nil {
			t.Fatalf("sm_%d: %v", arch, err)
		}
		seen := map[string]bool{}
		var cur string
		var report []string
		for _, line := range strings.Split(log, "\n") {
			if m := entry.FindStringSubmatch(line); m != nil {
				cur = m[1]
				seen[cur] = true
			}
			if m := spills.FindStringSubmatch(line); m != nil && (m[1] != "0" || m[2] != "0") {
				t.Errorf("sm_%d %s spills: %s", arch, cur, strings.TrimSpace(line))
			}
			if m := regs.FindStringSubmatch(line); m != nil {
				report = append(report, cur+"="+m[1])
			}
		}
		for _, k := range kernelNames() {
			if !seen[k] {
				t.Errorf("sm_%d: ptxas reported nothing for %s", arch, k)
			}
		}
		t.Logf("sm_%d registers: %s", arch, strings.Join(report, " "))
	}
}
