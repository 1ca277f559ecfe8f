package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// EnvLibDir is the environment variable naming a folder searched first for
// every CUDA library.
const EnvLibDir = "TINYSERVE_CUDA_LIB_DIR"

// LibDirFromEnv returns $TINYSERVE_CUDA_LIB_DIR. It is the one place the
// package reads that variable; callers pass the result as Options.LibDir so
// that nothing deeper depends on the process environment.
func LibDirFromEnv() string { return os.Getenv(EnvLibDir) }

// Library describes one shared library to find: the file names to try, in
// order of preference, and the NVIDIA pip package folder that ships it.
type Library struct {
	// Name is what errors call the library, e.g. "cuBLAS".
	Name string
	// Files are the candidate file names, newest soname first.
	Files []string
	// PipPackage is the folder under site-packages/nvidia that holds it in
	// NVIDIA's pip wheels ("cublas", "cuda_nvrtc"); empty for the driver,
	// which comes with the kernel module, not with pip.
	PipPackage string
}

// LibCUDA is the CUDA driver. It comes with the kernel driver, not with
// pip, so it has no pip folder.
func LibCUDA() Library {
	return Library{Name: "CUDA driver", Files: []string{"libcuda.so.1", "libcuda.so"}}
}

// LibCuBLAS is cuBLAS: CUDA 13 and 12 sonames first; the unversioned name
// (present only with the toolkit's -dev files) last. Functions rather than
// variables, so that no caller can change what another one searches for.
func LibCuBLAS() Library {
	return Library{Name: "cuBLAS", Files: []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"}, PipPackage: "cublas"}
}

// LibNVRTC is the CUDA runtime compiler, newest soname first.
func LibNVRTC() Library {
	return Library{Name: "NVRTC", Files: []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"}, PipPackage: "cuda_nvrtc"}
}

// ForDriver drops the candidate files of a CUDA major version newer than
// the driver's (driverVersion as cuDriverGetVersion reports it, e.g. 12040):
// cuBLAS 13 or NVRTC 13 cubins do not run on a CUDA 12 driver, so where pip
// installed both, the 12 build must win. Zero keeps every candidate.
func (l Library) ForDriver(driverVersion int) Library {
	if driverVersion <= 0 {
		return l
	}
	major := driverVersion / 1000
	out := l
	out.Files = nil
	for _, f := range l.Files {
		if v := sonameMajor(f); v == 0 || v <= major {
			out.Files = append(out.Files, f)
		}
	}
	return out
}

// ForArch drops the candidate files of CUDA major versions that no longer
// support the GPU's architecture (arch is 10*major+minor of its compute
// capability): CUDA 13 dropped everything before Turing (sm_75), so a
// Volta GPU needs NVRTC and cuBLAS 12 even under a CUDA 13 driver. Zero
// keeps every candidate.
func (l Library) ForArch(arch int) Library {
	if arch <= 0 || arch >= 75 {
		return l
	}
	out := l
	out.Files = nil
	for _, f := range l.Files {
		if sonameMajor(f) < 13 {
			out.Files = append(out.Files, f)
		}
	}
	return out
}

// sonameMajor is N in lib*.so.N[.M], or 0 for an unversioned name.
func sonameMajor(file string) int {
	_, ver, ok := strings.Cut(file, ".so.")
	if !ok {
		return 0
	}
	n := 0
	for _, c := range ver {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// NotFoundError says that a library is in none of the places searched.
type NotFoundError struct {
	// Lib is the library that is missing.
	Lib Library
	// Searched are the folders looked in, in order, plus any other place
	// tried (the system loader's own search path).
	Searched []string
}

// Error lists the library, the names tried and every place searched, and
// says how to point tinyserve at the library.
func (e *NotFoundError) Error() string {
	var b strings.Builder
	if e.Lib.Name == LibCUDA().Name {
		// No driver library almost always means no NVIDIA GPU or driver
		// here: say that first, with the way out, and the search after.
		b.WriteString("cuda: no NVIDIA driver on this machine (use --backend cpu, or install the NVIDIA driver); details follow\n")
	}
	fmt.Fprintf(&b, "cuda: %s library not found (tried %s) in:", e.Lib.Name, strings.Join(e.Lib.Files, ", "))
	for _, s := range e.Searched {
		b.WriteString("\n  ")
		b.WriteString(s)
	}
	fmt.Fprintf(&b, "\nset %s to the folder that holds it, or install the CUDA toolkit or NVIDIA's pip wheels", EnvLibDir)
	return b.String()
}

// SearchDirs lists the folders searched for the CUDA libraries, in order:
// libDir (from Options.LibDir), LD_LIBRARY_PATH, the usual CUDA and driver
// folders, then the NVIDIA pip packages' lib folders of every Python
// site-packages folder found. getenv reads LD_LIBRARY_PATH, PATH,
// VIRTUAL_ENV, CONDA_PREFIX and HOME; nil means os.Getenv. Folders that do
// not exist are kept (so an error can say they were tried) but listed once.
// Folders named "stubs" are left out: the toolkit's link-time stub
// libcuda.so found there answers every call with CUDA_ERROR_STUB_LIBRARY.
func SearchDirs(libDir string, getenv func(string) string) []string {
	if getenv == nil {
		getenv = os.Getenv
	}
	var dirs []string
	seen := map[string]bool{}
	add := func(d string) {
		if d == "" || seen[d] || filepath.Base(d) == "stubs" {
			return
		}
		seen[d] = true
		dirs = append(dirs, d)
	}
	add(libDir)
	for _, d := range filepath.SplitList(getenv("LD_LIBRARY_PATH")) {
		add(d)
	}
	arch := "x86_64"
	if runtime.GOARCH == "arm64" {
		arch = "aarch64"
	}
	for _, d := range []string{
		"/usr/local/cuda/lib64",
		"/usr/local/cuda/targets/" + arch + "-linux/lib",
		"/usr/lib/" + arch + "-linux-gnu",
		"/usr/lib64",
		"/usr/local/nvidia/lib64",
		"/usr/local/nvidia/lib",
		"/usr/lib/wsl/lib",
	} {
		add(d)
	}
	for _, sp := range sitePackages(getenv) {
		for _, pkg := range []string{"cuda_runtime", "cublas", "cuda_nvrtc", "cu13", "cu12"} {
			add(filepath.Join(sp, "nvidia", pkg, "lib"))
		}
	}
	return dirs
}

// sitePackages finds Python site-packages and dist-packages folders in the
// usual prefixes (a virtualenv, conda, the python3 first on PATH, ~/.local,
// /usr/local, the system) without running Python. The python3 on PATH
// counts because an image may put a virtualenv's bin folder on PATH without
// setting VIRTUAL_ENV; its prefix is the folder above bin. An image may
// instead link a virtualenv's interpreter into a folder already on PATH
// (/usr/local/bin/python3 -> /opt/torch/.venv/bin/python3), so each link
// of the chain is followed one step at a time and the folder above each
// step's bin counts too (following the whole chain at once would skip the
// virtualenv and land on the system interpreter it links to).
func sitePackages(getenv func(string) string) []string {
	var prefixes []string
	for _, v := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if p := getenv(v); p != "" {
			prefixes = append(prefixes, p)
		}
	}
	for _, d := range filepath.SplitList(getenv("PATH")) {
		if st, err := os.Stat(filepath.Join(d, "python3")); d != "" && err == nil && !st.IsDir() {
			prefixes = append(prefixes, interpreterPrefixes(filepath.Join(filepath.Clean(d), "python3"))...)
			break
		}
	}
	if h := getenv("HOME"); h != "" {
		prefixes = append(prefixes, filepath.Join(h, ".local"))
	}
	prefixes = append(prefixes, "/usr/local", "/usr", "/opt/conda")
	var out []string
	for _, p := range prefixes {
		for _, pat := range []string{"lib/python3*/site-packages", "lib/python3*/dist-packages", "lib/python3/dist-packages"} {
			m, _ := filepath.Glob(filepath.Join(p, pat))
			out = append(out, m...)
		}
	}
	return out
}

// interpreterPrefixes is the folder above the bin folder of exe and of
// each file its chain of symbolic links passes through, in order (at most
// 8 links).
func interpreterPrefixes(exe string) []string {
	out := []string{filepath.Dir(filepath.Dir(exe))}
	for range 8 {
		target, err := os.Readlink(exe)
		if err != nil {
			break
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(exe), target)
		}
		exe = filepath.Clean(target)
		if p := filepath.Dir(filepath.Dir(exe)); !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// Locate returns the path of the first of lib's candidate files found in
// dirs (each folder tried with every name before the next folder), or a
// *NotFoundError listing dirs.
func Locate(lib Library, dirs []string) (string, error) {
	for _, d := range dirs {
		for _, f := range lib.Files {
			p := filepath.Join(d, f)
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				return p, nil
			}
		}
	}
	return "", &NotFoundError{Lib: lib, Searched: append([]string(nil), dirs...)}
}
