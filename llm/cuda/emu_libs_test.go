package cuda

// The emulator built as libcuda, cuBLAS and NVRTC (testdata/emu/driver.cc,
// blas.cc, nvrtc.cc):
// the backend's real bindings, through purego, on the host emulator.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/tinyserve/tinyserve/llm/model"
)

// emuLibDir puts the emulator with its library entry points into a fresh
// folder, under the names the library search looks for (symlinks to one
// file, so the three "libraries" are one loaded object sharing one
// emulated device). defines select driver.cc's variants. The library is
// compiled once per test binary and variant (emuLibrary) and copied: a
// copy is a file of its own, which the loader maps afresh, so each folder
// is a device of its own, as each compile used to make it.
func emuLibDir(t testing.TB, defines ...string) string {
	t.Helper()
	dir := t.TempDir()
	const name = "libtinyserve_cuda_emu.so"
	copyFile(t, emuLibrary(t, defines...), filepath.Join(dir, name))
	for _, link := range []string{"libcuda.so.1", "libcublas.so.12", "libnvrtc.so.12"} {
		if err := os.Symlink(name, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// emuLibs are the emulator libraries compiled so far, by their defines.
var emuLibs struct {
	sync.Mutex
	path map[string]string
}

// emuLibrary returns the emulator compiled with its driver, cuBLAS and
// NVRTC entry points and defines, compiling it on first use (about 5 s)
// into the test binary's scratch folder. It skips where the emulator
// cannot be built.
func emuLibrary(t testing.TB, defines ...string) string {
	t.Helper()
	loadEmu(t) // skips where the emulator cannot be built
	key := strings.Join(defines, " ")
	emuLibs.Lock()
	defer emuLibs.Unlock()
	if p, ok := emuLibs.path[key]; ok {
		return p
	}
	dir, err := os.MkdirTemp(testScratch, "emulib")
	if err != nil {
		t.Fatal(err)
	}
	lib, err := compileEmu(dir, KernelSource(), kernelNames(), true, defines...)
	if err != nil {
		t.Fatal(err)
	}
	if emuLibs.path == nil {
		emuLibs.path = map[string]string{}
	}
	emuLibs.path[key] = lib
	return lib
}

func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

// nullDevice opens the emulated libraries in dir and turns on the null
// device (kernels and GEMMs checked, then skipped) until the test ends; it
// returns the library handle.
func nullDevice(t testing.TB, dir string) uintptr {
	t.Helper()
	lib, err := purego.Dlopen(filepath.Join(dir, "libcuda.so.1"), purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		t.Fatal(err)
	}
	var setNull func(int32)
	purego.RegisterLibFunc(&setNull, lib, "ts_emu_set_null")
	setNull(1)
	t.Cleanup(func() { setNull(0) })
	return lib
}

// TestEmuLibraries runs NewBackend itself, unmodified, against the
// emulator built as libcuda, cuBLAS and NVRTC: every driver, cuBLAS and
// NVRTC call goes through purego into C functions declared with NVIDIA's
// prototypes, so argument order, widths and pointer conventions are
// checked as a GPU would check them. Then the float32 goldens (a GPT-2
// and a Qwen3) and graph replay run through those calls. (bench/gpu/emulate.sh runs the whole
// device check this way.)
func TestEmuLibraries(t *testing.T) {
	dir := emuLibDir(t)
	newDev := func(t testing.TB, m *model.Model, opts Options, numBlocks int) *Backend {
		t.Helper()
		opts.LibDir, opts.CacheDir = dir, t.TempDir()
		opts.Getenv = func(string) string { return "" } // only dir is searched first
		b, err := NewBackend(m, opts)
		if err != nil {
			t.Fatalf("NewBackend on the emulated libraries: %v", err)
		}
		t.Cleanup(func() {
			if err := b.Close(); err != nil {
				t.Error(err)
			}
		})
		if name, arch := b.Device(); !strings.Contains(name, "emulator") || arch != 90 {
			t.Fatalf("device %q sm_%d: not the emulator", name, arch)
		}
		if err := b.AllocateKV(numBlocks, 16); err != nil {
			t.Fatal(err)
		}
		return b
	}
	// One checkpoint per family: the calls are what is checked here, the
	// kernels' results are everywhere else.
	lim := goldenLimits{maxPrompt: emuLimits().maxPrompt, checkpoints: []string{"gpt2-tiny-hot", "qwen3-tiny"}}
	t.Run("golden", func(t *testing.T) { checkGoldenGreedyFloat32(t, newDev, lim) })
	t.Run("decoder_golden", func(t *testing.T) { checkDecoderGoldens(t, newDev, lim) })
	t.Run("graphs", func(t *testing.T) { checkGraphsMatchEager(t, newDev) })
	t.Run("max_kv_blocks", func(t *testing.T) {
		m := smallModel(t, nil)
		b, err := NewBackend(m, Options{LibDir: dir, CacheDir: t.TempDir(), Getenv: func(string) string { return "" }, GPUMemoryUtilization: 0.5})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		// Half of the emulated 2 GiB (less cuBLAS's 32 MiB workspace and the
		// small model's weights) less the activation reserve.
		n, err := b.MaxKVBlocks(16)
		if err != nil {
			t.Fatal(err)
		}
		per := b.KVBytesPerBlock(16)
		want := ((2<<30-32<<20)/2 - activationReserve) / per
		if n > int(want) || n < int(want)-64 {
			t.Errorf("MaxKVBlocks(16) = %d blocks of %d bytes; want just under %d (half of 2 GiB less the workspace, less the reserve)", n, per, want)
		}
	})
}

// TestEmuEventElapsedBinding: cuEventElapsedTime is bound as _v2 where the
// driver exports it (CUDA 13's headers call that one) and as the old name
// where it does not, and works either way.
func TestEmuEventElapsedBinding(t *testing.T) {
	for _, c := range []struct {
		defines []string
		want    string
	}{{nil, "cuEventElapsedTime_v2"}, {[]string{"TS_EMU_NO_EVENT_V2"}, "cuEventElapsedTime"}} {
		t.Run(c.want, func(t *testing.T) {
			d, err := LoadDriver([]string{emuLibDir(t, c.defines...)})
			if err != nil {
				t.Fatal(err)
			}
			if d.eventElapsedName != c.want {
				t.Fatalf("bound %q, want %q", d.eventElapsedName, c.want)
			}
			if err := d.Init(); err != nil {
				t.Fatal(err)
			}
			var ev [2]Event
			for i := range ev {
				if ev[i], err = d.EventCreate(); err != nil {
					t.Fatal(err)
				}
				defer d.EventDestroy(ev[i])
				if err := d.EventRecord(ev[i], 0); err != nil {
					t.Fatal(err)
				}
			}
			if ms, err := d.EventElapsed(ev[0], ev[1]); err != nil || ms < 0 {
				t.Errorf("EventElapsed = %g, %v", ms, err)
			}
		})
	}
}

// TestEmuMemoryIsPoisoned: the emulated driver's device and page-locked
// allocations hold 0xff bytes (NaN as a float, -1 as an int32), not zeros,
// as a GPU's cuMemAlloc holds whatever was there before: every emulated
// test then fails on a read of memory nothing wrote instead of passing on
// zeros a GPU would not provide.
func TestEmuMemoryIsPoisoned(t *testing.T) {
	d, err := LoadDriver([]string{emuLibDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Init(); err != nil {
		t.Fatal(err)
	}
	const n = 4096
	p, err := d.MemAlloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer d.MemFree(p)
	host, err := d.MemAllocHost(n)
	if err != nil {
		t.Fatal(err)
	}
	defer d.MemFreeHost(host)
	for i, b := range unsafe.Slice((*byte)(host), n) {
		if b != 0xff {
			t.Fatalf("page-locked byte %d is %#x, want the 0xff poison", i, b)
		}
	}
	back := make([]byte, n)
	if err := d.CopyDtoH(unsafe.Pointer(&back[0]), p, n, 0); err != nil {
		t.Fatal(err)
	}
	if err := d.StreamSync(0); err != nil {
		t.Fatal(err)
	}
	for i, b := range back {
		if b != 0xff {
			t.Fatalf("device byte %d is %#x, want the 0xff poison", i, b)
		}
	}
}

// BenchmarkLaunchCallPath measures what one cuLaunchKernel costs on the
// host through each purego calling path, on the emulated driver with the
// null device (the kernel is checked and skipped), so that the figures are
// the Go side's: RegisterFunc's reflect-based wrapper against SyscallN,
// which the driver bindings use for the per-step calls. It reports both
// and their ratio.
func BenchmarkLaunchCallPath(b *testing.B) {
	dir := emuLibDir(b)
	lib := nullDevice(b, dir)
	d, err := LoadDriver([]string{dir})
	if err != nil {
		b.Fatal(err)
	}
	if err := d.Init(); err != nil {
		b.Fatal(err)
	}
	var mod Module
	var fn Function
	marker := []byte("tinyserve-cuda-emulator image\n\x00")
	if r := d.moduleLoadData(&mod, unsafe.Pointer(&marker[0])); r != 0 {
		b.Fatalf("cuModuleLoadData: %d", r)
	}
	if r := d.moduleGetFunction(&fn, mod, "residual_f32"); r != 0 {
		b.Fatalf("cuModuleGetFunction: %d", r)
	}
	var regLaunch func(f Function, gx, gy, gz, bx, by, bz uint32, shared uint32, s Stream, params unsafe.Pointer, extra unsafe.Pointer) int32
	purego.RegisterLibFunc(&regLaunch, lib, "cuLaunchKernel")
	var x, in, bias DevicePtr
	rows, cols := int32(4), int32(768)
	params := []unsafe.Pointer{unsafe.Pointer(&x), unsafe.Pointer(&in), unsafe.Pointer(&bias), unsafe.Pointer(&rows), unsafe.Pointer(&cols)}
	measure := func(launch func(Function, uint32, uint32, uint32, uint32, uint32, uint32, uint32, Stream, unsafe.Pointer, unsafe.Pointer) int32, n int) float64 {
		start := time.Now()
		for range n {
			if r := launch(fn, 12, 1, 1, 256, 1, 1, 0, 0, unsafe.Pointer(&params[0]), nil); r != 0 {
				b.Fatalf("cuLaunchKernel: %d", r)
			}
		}
		return float64(time.Since(start).Nanoseconds()) / float64(n)
	}
	var reg, sys float64
	for b.Loop() {
		reg += measure(regLaunch, 100)
		sys += measure(d.launchKernel, 100)
	}
	b.ReportMetric(reg/float64(b.N), "registerfunc-ns/call")
	b.ReportMetric(sys/float64(b.N), "syscalln-ns/call")
	b.ReportMetric(reg/sys, "registerfunc/syscalln")
}

// TestEmuStepAllocations: a decode step through the real bindings (the
// emulated libraries, null device) allocates almost nothing on the Go
// heap — the per-call argument slices of purego would add about 160 per
// step. Run without the race detector by .ci/run.
func TestEmuStepAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector; .ci/run runs this test without it")
	}
	dir := emuLibDir(t)
	nullDevice(t, dir)
	m := smallModel(t, nil)
	for _, graphs := range []bool{false, true} {
		b, err := NewBackend(m, Options{DType: "float16", LibDir: dir, CacheDir: t.TempDir(), Getenv: func(string) string { return "" }, CUDAGraphs: graphs})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.AllocateKV(16, 16); err != nil {
			t.Fatal(err)
		}
		s := newStepper(t, b, 16)
		prompts := smallPrompts(300, 5, 9)
		batch := batchOf(s, part{id: kvID(0), tokens: prompts[0], sample: true}, part{id: kvID(1), tokens: prompts[1], sample: true})
		if _, err := b.Forward(batch); err != nil {
			t.Fatal(err)
		}
		decode := batchOf(s, part{id: kvID(0), tokens: []int{1}, start: 5, sample: true}, part{id: kvID(1), tokens: []int{2}, start: 9, sample: true})
		allocs := testing.AllocsPerRun(50, func() {
			if _, err := b.Forward(decode); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > 4 {
			t.Errorf("graphs=%v: %.0f allocations per decode step, want at most 4", graphs, allocs)
		}
		t.Logf("graphs=%v: %.0f allocations per decode step", graphs, allocs)
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEmuSystemDriverFirst: with no library folder given, NewBackend opens
// the driver the system loader picks (here the emulator, through the
// process's LD_LIBRARY_PATH) before any folder of the library search,
// which here (through Options.Getenv) offers a broken libcuda.so.1 first:
// the folder list alone would have opened that one and failed. It runs
// in a child process, since the loader reads LD_LIBRARY_PATH at start.
func TestEmuSystemDriverFirst(t *testing.T) {
	if dir := os.Getenv("TS_TEST_SYSTEM_DRIVER_DIR"); dir != "" {
		bad := t.TempDir()
		touch(t, bad, "libcuda.so.1") // not a library: dlopen fails
		env := map[string]string{"LD_LIBRARY_PATH": bad + ":" + dir}
		b, err := NewBackend(tinyModel(t), Options{DType: "float32", CacheDir: t.TempDir(), Getenv: func(k string) string { return env[k] }})
		if err != nil {
			t.Fatalf("NewBackend: %v", err)
		}
		defer b.Close()
		if want := filepath.Join(dir, "libcuda.so.1"); b.drv.Path != want {
			t.Fatalf("driver from %q, want the system loader's %q", b.drv.Path, want)
		}
		return
	}
	dir := t.TempDir()
	// One file named as the driver, so that /proc/self/maps names it so;
	// cuBLAS and NVRTC are links to it (one loaded object, one device).
	copyFile(t, emuLibrary(t), filepath.Join(dir, "libcuda.so.1"))
	for _, name := range []string{"libcublas.so.12", "libnvrtc.so.12"} {
		if err := os.Symlink("libcuda.so.1", filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestEmuSystemDriverFirst$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "TS_TEST_SYSTEM_DRIVER_DIR="+dir, "LD_LIBRARY_PATH="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestEmuSystemDriverFirst") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}
