package cuda

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// binder resolves a library's symbols into Go function values, keeping the
// first failure so a loader can bind a whole table and check once.
type binder struct {
	lib    string
	handle uintptr
	err    error
}

// bind points fptr (a pointer to a func variable) at the C function name.
// A missing symbol is an error, never purego's panic.
func (b *binder) bind(fptr any, name string) {
	if sym := b.symbol(name); sym != 0 {
		purego.RegisterFunc(fptr, sym)
	}
}

// symbol returns the address of the C function name, or 0 after
// recording the error. The per-step calls (launches, GEMMs, copies) go
// through purego.SyscallN on it instead of RegisterFunc: RegisterFunc's
// reflect-based wrapper costs about a microsecond more per call, and a
// step makes about 160 of them.
func (b *binder) symbol(name string) uintptr {
	if b.err != nil {
		return 0
	}
	sym, err := purego.Dlsym(b.handle, name)
	if err != nil {
		b.err = fmt.Errorf("cuda: %s: symbol %s: %w", b.lib, name, err)
		return 0
	}
	return sym
}

// argBufs hold the arguments of ccall's calls.
var argBufs = sync.Pool{New: func() any { return new([32]uintptr) }}

// ccall calls the C function at fn with args and returns its result,
// without allocating: purego.SyscallN's variadic slice escapes (its
// uintptrescapes directive keeps pointers passed as uintptr alive), so a slice
// built at each call would be a heap allocation; a pooled buffer is not.
// Pointers among args must point to memory that stays reachable and does
// not move during the call (heap objects, C memory), as every caller's do.
func ccall(fn uintptr, args ...uintptr) uintptr {
	buf := argBufs.Get().(*[32]uintptr)
	n := copy(buf[:], args)
	r, _, _ := purego.SyscallN(fn, buf[:n]...)
	argBufs.Put(buf)
	return r
}

// optional binds name when the library has it and reports whether it did;
// used for calls that newer releases added.
func (b *binder) optional(fptr any, name string) bool {
	sym, err := purego.Dlsym(b.handle, name)
	if err != nil {
		return false
	}
	purego.RegisterFunc(fptr, sym)
	return true
}

// openLibrary finds lib in dirs and dlopens it. When the file is in none of
// the folders, the driver is also tried by soname through the system
// loader's own search (ld.so.cache), where distributions put libcuda.so.1.
// Companion libraries in the same folder (cuBLASLt for cuBLAS, the NVRTC
// builtins) are opened first with RTLD_GLOBAL so that a pip wheel's folder
// works without LD_LIBRARY_PATH.
func openLibrary(lib Library, dirs []string, companions []string) (uintptr, string, error) {
	path, err := Locate(lib, dirs)
	if err != nil {
		if lib.PipPackage == "" {
			for _, f := range lib.Files {
				if h, derr := purego.Dlopen(f, purego.RTLD_NOW|purego.RTLD_GLOBAL); derr == nil {
					return h, f, nil
				}
			}
			nf := err.(*NotFoundError)
			nf.Searched = append(nf.Searched, systemLoaderPlace)
		}
		return 0, "", err
	}
	dir := filepath.Dir(path)
	for _, pat := range sameRelease(path, companions) {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		for _, c := range m {
			_, _ = purego.Dlopen(c, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		}
	}
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return 0, path, fmt.Errorf("cuda: open %s (%s): %w", lib.Name, path, err)
	}
	return h, path, nil
}

// sameRelease narrows companion patterns of the form "libX.so.*" to the
// major version of the library at path (followed through its symlinks when
// its own name has none), so that a folder holding two CUDA releases, as a
// distribution's library folder may, does not load the other release's
// cuBLASLt or NVRTC builtins into the process before the library that needs
// its own. Other patterns, and every pattern for an unversioned library,
// are kept as they are.
func sameRelease(path string, companions []string) []string {
	major := sonameMajor(filepath.Base(path))
	if major == 0 {
		if real, err := filepath.EvalSymlinks(path); err == nil {
			major = sonameMajor(filepath.Base(real))
		}
	}
	if major == 0 {
		return companions
	}
	var out []string
	for _, c := range companions {
		base, ok := strings.CutSuffix(c, ".so.*")
		if !ok {
			out = append(out, c)
			continue
		}
		out = append(out, fmt.Sprintf("%s.so.%d", base, major), fmt.Sprintf("%s.so.%d.*", base, major))
	}
	return out
}

// goString copies a NUL-terminated C string owned by a library.
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	var b strings.Builder
	for i := 0; ; i++ {
		c := *(*byte)(unsafe.Add(unsafe.Pointer(p), i))
		if c == 0 {
			break
		}
		b.WriteByte(c)
	}
	return b.String()
}

// cString returns a NUL-terminated copy of s in Go memory, for calls that
// take an array of C strings (purego converts single string arguments).
func cString(s string) *byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return &b[0]
}
