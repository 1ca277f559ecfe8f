package cuda

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"unsafe"
)

// kernelSource is the CUDA C of every kernel the backend launches; see the
// file's header comment for the batch layout it reads.
//
//go:embed kernels/decoder.cu
var kernelSource string

// kernelFile is the source's name in NVRTC's messages.
const kernelFile = "decoder.cu"

// KernelSource returns the embedded CUDA C source, for tools that want to
// compile or inspect it outside the backend.
func KernelSource() string { return kernelSource }

// CacheKey names a compiled image of src for compute capability arch
// (e.g. 90 for sm_90) made by compiler (NVRTC's version, as
// kernelBuild.compiler): a different source, GPU, compiler or set of
// compile options never reuses a cached image. The kind (cubin or ptx) is
// the file's extension.
func CacheKey(src string, arch int, compiler string) string {
	h := sha256.New()
	for _, part := range append([]string{src, compiler}, compileOptions(fmt.Sprintf("sm_%d", arch))...) {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return fmt.Sprintf("decoder-%s-sm_%d", hex.EncodeToString(h.Sum(nil)[:16]), arch)
}

// compileOptions are NVRTC's options for --gpu-architecture target
// (sm_90, or compute_90 for PTX).
func compileOptions(target string) []string {
	return []string{"--gpu-architecture=" + target, "-default-device", "--std=c++17"}
}

// DefaultCacheDir is os.UserCacheDir()/tinyserve/cuda, or a folder under
// the temporary directory when the user has no cache folder.
func DefaultCacheDir() string {
	d, err := os.UserCacheDir()
	if err != nil || d == "" {
		d = os.TempDir()
	}
	return filepath.Join(d, "tinyserve", "cuda")
}

// kernelBuild is the compilation of the kernels for one GPU by one NVRTC,
// with its image cached on disk under CacheKey.
type kernelBuild struct {
	rtc      *NVRTC // compiles on a cache miss
	src      string
	arch     int
	compiler string // NVRTC's version ("nvrtc-12.4"), part of the key
	cacheDir string
	log      *slog.Logger
}

// newKernelBuild describes the build of src for arch by rtc.
func newKernelBuild(rtc *NVRTC, src string, arch int, cacheDir string, log *slog.Logger) (kernelBuild, error) {
	major, minor, err := rtc.Version()
	if err != nil {
		return kernelBuild{}, err
	}
	return kernelBuild{rtc: rtc, src: src, arch: arch, compiler: fmt.Sprintf("nvrtc-%d.%d", major, minor), cacheDir: cacheDir, log: log}, nil
}

func (k kernelBuild) key() string { return CacheKey(k.src, k.arch, k.compiler) }

// image returns the module image: from the cache when an earlier run
// compiled it, else compiled by NVRTC (a cubin for sm_arch, or, when this
// NVRTC is older than the GPU, PTX for the newest architecture it knows,
// which the driver then compiles) and written to the cache. A cache that
// cannot be written only costs a recompile next time.
func (k kernelBuild) image() ([]byte, error) {
	for _, ext := range []string{".cubin", ".ptx"} {
		file := filepath.Join(k.cacheDir, k.key()+ext)
		if img, err := os.ReadFile(file); err == nil && len(img) > 0 {
			k.log.Debug("cuda: kernels from cache", "file", file)
			return img, nil
		}
	}
	return k.compile()
}

// dropCached removes the cached images, after the driver refused one
// (damaged, say).
func (k kernelBuild) dropCached() {
	for _, ext := range []string{".cubin", ".ptx"} {
		_ = os.Remove(filepath.Join(k.cacheDir, k.key()+ext))
	}
}

// compile compiles the kernels and caches the result.
func (k kernelBuild) compile() ([]byte, error) {
	img, err := k.rtc.Compile(k.src, kernelFile, compileOptions(fmt.Sprintf("sm_%d", k.arch)), true)
	ext := ".cubin"
	if err != nil {
		var ce *CompileError
		if errors.As(err, &ce) && ce.Log != "" && !archRejected(err) {
			return nil, fmt.Errorf("cuda: compiling the kernels for sm_%d: %w", k.arch, err)
		}
		ptxArch, aerr := ptxFallbackArch(k.rtc, k.arch)
		if aerr != nil {
			return nil, fmt.Errorf("cuda: compiling the kernels for sm_%d: %w (and no PTX fallback: %v)", k.arch, err, aerr)
		}
		k.log.Info("cuda: NVRTC cannot target this GPU directly; compiling PTX", "arch", k.arch, "ptx_arch", ptxArch, "err", err)
		img, err = k.rtc.Compile(k.src, kernelFile, compileOptions(fmt.Sprintf("compute_%d", ptxArch)), false)
		if err != nil {
			return nil, fmt.Errorf("cuda: compiling the kernels to PTX for compute_%d: %w", ptxArch, err)
		}
		ext = ".ptx"
	}
	if err := writeCache(k.cacheDir, k.key()+ext, img); err != nil {
		k.log.Warn("cuda: cannot cache compiled kernels", "dir", k.cacheDir, "err", err)
	}
	return img, nil
}

// archRejected reports whether a compile failure is NVRTC refusing the
// --gpu-architecture option (a GPU newer than the compiler).
func archRejected(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Lib == "nvrtc" && e.Code == 5 // NVRTC_ERROR_INVALID_OPTION
}

// ptxFallbackArch is the newest architecture NVRTC supports that is not
// newer than the device's (PTX for it runs on the device).
func ptxFallbackArch(rtc *NVRTC, arch int) (int, error) {
	archs, err := rtc.SupportedArchs()
	if err != nil {
		return 0, err
	}
	slices.Sort(archs)
	best := 0
	for _, a := range archs {
		if a <= arch {
			best = a
		}
	}
	if best == 0 {
		return 0, fmt.Errorf("NVRTC at %s supports none of the architectures up to sm_%d (it knows %v)", rtc.Path, arch, archs)
	}
	return best, nil
}

// writeCache writes a file atomically (temp file + rename), so a
// concurrent or interrupted run never leaves half an image behind.
func writeCache(dir, name string, data []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, name+".tmp*")
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), filepath.Join(dir, name))
}

// kernelArgs is cuLaunchKernel's parameter array: ptrs[i] points at
// vals[i], whose low bytes hold the i-th argument (little-endian, so a
// 4-byte int or float reads correctly from an 8-byte slot). It lives inside
// the heap-allocated Backend, whose memory Go never moves.
type kernelArgs struct {
	vals [20]uint64
	ptrs [20]unsafe.Pointer
	n    int
}

// reset empties the array for the next launch.
func (a *kernelArgs) reset() *kernelArgs {
	a.n = 0
	return a
}

// ptr, i32 and f32 append one argument of their type.
func (a *kernelArgs) ptr(p DevicePtr) *kernelArgs { return a.put(uint64(p)) }
func (a *kernelArgs) i32(v int) *kernelArgs       { return a.put(uint64(uint32(int32(v)))) }
func (a *kernelArgs) f32(v float32) *kernelArgs   { return a.put(uint64(math.Float32bits(v))) }

func (a *kernelArgs) put(v uint64) *kernelArgs {
	a.vals[a.n] = v
	a.ptrs[a.n] = unsafe.Pointer(&a.vals[a.n])
	a.n++
	return a
}
