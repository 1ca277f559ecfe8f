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
//go:embed kernels/gpt2.cu
var kernelSource string

// KernelSource returns the embedded CUDA C source, for tools that want to
// compile or inspect it outside the backend.
func KernelSource() string { return kernelSource }

// CacheKey names a compiled image of src for compute capability arch
// (e.g. 90 for sm_90): a different source or GPU never reuses a cached
// image. The kind (cubin or ptx) is the file's extension.
func CacheKey(src string, arch int) string {
	h := sha256.Sum256([]byte(src))
	return fmt.Sprintf("gpt2-%s-sm_%d", hex.EncodeToString(h[:16]), arch)
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

// kernelImage returns the module image of src for arch: from cacheDir when
// an earlier run compiled it, else compiled by NVRTC (a cubin for sm_arch,
// or, when this NVRTC is older than the GPU, PTX for the newest
// architecture it knows, which the driver then compiles) and written to the
// cache. A cache that cannot be written only costs a recompile next time.
func kernelImage(rtc *NVRTC, src string, arch int, cacheDir string, log *slog.Logger) ([]byte, error) {
	key := CacheKey(src, arch)
	for _, ext := range []string{".cubin", ".ptx"} {
		if img, err := os.ReadFile(filepath.Join(cacheDir, key+ext)); err == nil && len(img) > 0 {
			log.Debug("cuda: kernels from cache", "file", filepath.Join(cacheDir, key+ext))
			return img, nil
		}
	}
	return compileKernels(rtc, src, arch, cacheDir, log)
}

// dropCachedImage removes the cached images of src for arch, after the
// driver refused one (e.g. PTX from a newer NVRTC than the driver).
func dropCachedImage(src string, arch int, cacheDir string) {
	key := CacheKey(src, arch)
	for _, ext := range []string{".cubin", ".ptx"} {
		_ = os.Remove(filepath.Join(cacheDir, key+ext))
	}
}

// compileKernels compiles src for arch and caches the result.
func compileKernels(rtc *NVRTC, src string, arch int, cacheDir string, log *slog.Logger) ([]byte, error) {
	key := CacheKey(src, arch)
	opts := []string{fmt.Sprintf("--gpu-architecture=sm_%d", arch), "-default-device", "--std=c++17"}
	img, err := rtc.Compile(src, "gpt2.cu", opts, true)
	ext := ".cubin"
	if err != nil {
		var ce *CompileError
		if errors.As(err, &ce) && ce.Log != "" && !archRejected(err) {
			return nil, fmt.Errorf("cuda: compiling the kernels for sm_%d: %w", arch, err)
		}
		ptxArch, aerr := ptxFallbackArch(rtc, arch)
		if aerr != nil {
			return nil, fmt.Errorf("cuda: compiling the kernels for sm_%d: %w (and no PTX fallback: %v)", arch, err, aerr)
		}
		log.Info("cuda: NVRTC cannot target this GPU directly; compiling PTX", "arch", arch, "ptx_arch", ptxArch, "err", err)
		opts[0] = fmt.Sprintf("--gpu-architecture=compute_%d", ptxArch)
		img, err = rtc.Compile(src, "gpt2.cu", opts, false)
		if err != nil {
			return nil, fmt.Errorf("cuda: compiling the kernels to PTX for compute_%d: %w", ptxArch, err)
		}
		ext = ".ptx"
	}
	if err := writeCache(cacheDir, key+ext, img); err != nil {
		log.Warn("cuda: cannot cache compiled kernels", "dir", cacheDir, "err", err)
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
	vals [16]uint64
	ptrs [16]unsafe.Pointer
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
