package cuda

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func touch(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("not a library"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLocate(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	touch(t, a, "libnvrtc.so.12")
	touch(t, b, "libnvrtc.so.13")
	touch(t, b, "libcublas.so.12")
	touch(t, a, "libcublas.so") // unversioned: least preferred within a folder
	if err := os.Mkdir(filepath.Join(a, "libcuda.so.1"), 0o755); err != nil {
		t.Fatal(err) // a folder with the library's name is not the library
	}
	cases := []struct {
		lib  Library
		dirs []string
		want string
	}{
		{LibNVRTC(), []string{a, b}, filepath.Join(a, "libnvrtc.so.12")}, // folder order wins over soname order
		{LibNVRTC(), []string{b, a}, filepath.Join(b, "libnvrtc.so.13")},
		{LibCuBLAS(), []string{a, b}, filepath.Join(a, "libcublas.so")},
		{LibCuBLAS(), []string{b, a}, filepath.Join(b, "libcublas.so.12")},
	}
	for _, c := range cases {
		got, err := Locate(c.lib, c.dirs)
		if err != nil || got != c.want {
			t.Errorf("Locate(%s, %v) = %q, %v; want %q", c.lib.Name, c.dirs, got, err, c.want)
		}
	}
	_, err := Locate(LibCUDA(), []string{a, b})
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("Locate(driver) error %v, want *NotFoundError", err)
	}
	// A missing driver says so in its first line, with what to do.
	first, _, _ := strings.Cut(err.Error(), "\n")
	if !strings.Contains(first, "no NVIDIA driver") || !strings.Contains(first, "--backend cpu") {
		t.Errorf("first line %q: want the missing driver and --backend cpu", first)
	}
	_, err = Locate(LibCuBLAS(), []string{t.TempDir()})
	if first, _, _ := strings.Cut(err.Error(), "\n"); strings.Contains(first, "driver") {
		t.Errorf("a missing cuBLAS blamed the driver: %q", first)
	}
}

func TestLocateNothingFoundNamesEveryPlace(t *testing.T) {
	dirs := []string{t.TempDir(), filepath.Join(t.TempDir(), "missing"), "/nonexistent/cuda/lib64"}
	_, err := Locate(LibCuBLAS(), dirs)
	if err == nil {
		t.Fatal("Locate found cuBLAS in empty folders")
	}
	msg := err.Error()
	for _, want := range append(slices.Clone(dirs), "cuBLAS", "libcublas.so.13", "libcublas.so.12", EnvLibDir) {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not mention %q:\n%s", want, msg)
		}
	}
}

func TestSearchDirs(t *testing.T) {
	venv := t.TempDir()
	sp := filepath.Join(venv, "lib", "python3.12", "site-packages")
	touch(t, sp, "nvidia/cublas/lib/libcublas.so.12")
	touch(t, sp, "nvidia/cuda_nvrtc/lib/libnvrtc.so.12")
	env := map[string]string{
		"LD_LIBRARY_PATH": "/opt/a:/opt/b::/opt/a",
		"VIRTUAL_ENV":     venv,
	}
	dirs := SearchDirs("/my/cuda", func(k string) string { return env[k] })
	if dirs[0] != "/my/cuda" || dirs[1] != "/opt/a" || dirs[2] != "/opt/b" {
		t.Errorf("first dirs %v, want the lib dir, then LD_LIBRARY_PATH in order without duplicates", dirs[:4])
	}
	for _, want := range []string{"/usr/local/cuda/lib64", "/usr/local/nvidia/lib64", filepath.Join(sp, "nvidia", "cublas", "lib"), filepath.Join(sp, "nvidia", "cuda_nvrtc", "lib")} {
		if !slices.Contains(dirs, want) {
			t.Errorf("SearchDirs lacks %s: %v", want, dirs)
		}
	}
	if got, err := Locate(LibCuBLAS(), dirs); err == nil && !strings.HasPrefix(got, "/usr") && got != filepath.Join(sp, "nvidia/cublas/lib/libcublas.so.12") {
		t.Errorf("Locate(cuBLAS) = %s", got)
	}
	// A virtualenv known only by its python3 on PATH; a stubs folder in
	// LD_LIBRARY_PATH is skipped.
	venv2 := t.TempDir()
	sp2 := filepath.Join(venv2, "lib", "python3.12", "site-packages")
	touch(t, venv2, "bin/python3")
	touch(t, sp2, "nvidia/cublas/lib/libcublas.so.13")
	env = map[string]string{"PATH": "/nonexistent/bin:" + filepath.Join(venv2, "bin"), "LD_LIBRARY_PATH": "/usr/local/cuda/lib64/stubs"}
	dirs = SearchDirs("", func(k string) string { return env[k] })
	if want := filepath.Join(sp2, "nvidia", "cublas", "lib"); !slices.Contains(dirs, want) {
		t.Errorf("SearchDirs lacks %s (the site-packages of the python3 on PATH): %v", want, dirs)
	}
	if slices.Contains(dirs, "/usr/local/cuda/lib64/stubs") {
		t.Errorf("SearchDirs kept the stub library folder: %v", dirs)
	}
	// A virtualenv's interpreter linked into a folder on PATH
	// (/usr/local/bin/python3 -> venv/bin/python3 -> python3.12, as an
	// image may do): the virtualenv's site-packages are searched.
	venv3, bin3 := t.TempDir(), t.TempDir()
	sp3 := filepath.Join(venv3, "lib", "python3.12", "site-packages")
	touch(t, venv3, "bin/python3.12")
	touch(t, sp3, "nvidia/cu13/lib/libcublas.so.13")
	if err := os.Symlink("python3.12", filepath.Join(venv3, "bin", "python3")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(venv3, "bin", "python3"), filepath.Join(bin3, "python3")); err != nil {
		t.Fatal(err)
	}
	env = map[string]string{"PATH": bin3}
	dirs = SearchDirs("", func(k string) string { return env[k] })
	if want := filepath.Join(sp3, "nvidia", "cu13", "lib"); !slices.Contains(dirs, want) {
		t.Errorf("SearchDirs lacks %s (the site-packages of the virtualenv the python3 on PATH links to): %v", want, dirs)
	}
	if got, err := Locate(LibCuBLAS(), dirs); err != nil || !strings.HasPrefix(got, "/usr") && got != filepath.Join(sp3, "nvidia/cu13/lib/libcublas.so.13") {
		t.Errorf("Locate(cuBLAS) = %q, %v; want the linked virtualenv's CUDA 13 wheel", got, err)
	}
	// No lib dir, empty environment: no empty entry.
	for _, d := range SearchDirs("", func(string) string { return "" }) {
		if d == "" {
			t.Error("SearchDirs returned an empty folder")
		}
	}
}

func TestLibraryForDriver(t *testing.T) {
	cases := []struct {
		v    int
		want []string
	}{
		{0, LibCuBLAS().Files},
		{12040, []string{"libcublas.so.12", "libcublas.so.11", "libcublas.so"}},
		{13000, LibCuBLAS().Files},
	}
	for _, c := range cases {
		if got := LibCuBLAS().ForDriver(c.v).Files; !slices.Equal(got, c.want) {
			t.Errorf("ForDriver(%d) = %v, want %v", c.v, got, c.want)
		}
	}
	if got := LibNVRTC().ForDriver(11080).Files; !slices.Equal(got, []string{"libnvrtc.so.11.2", "libnvrtc.so"}) {
		t.Errorf("NVRTC for 11.8: %v", got)
	}
}

// TestLibraryForArch: CUDA 13 libraries are no candidates for a GPU before
// Turing, whatever the driver; Turing and newer keep them.
func TestLibraryForArch(t *testing.T) {
	for _, c := range []struct {
		arch int
		want []string
	}{
		{0, LibNVRTC().Files},
		{70, []string{"libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"}},
		{72, []string{"libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"}},
		{75, LibNVRTC().Files},
		{90, LibNVRTC().Files},
	} {
		if got := LibNVRTC().ForDriver(13000).ForArch(c.arch).Files; !slices.Equal(got, c.want) {
			t.Errorf("ForArch(%d) = %v, want %v", c.arch, got, c.want)
		}
	}
	if got := LibCuBLAS().ForArch(70).Files; slices.Contains(got, "libcublas.so.13") || !slices.Contains(got, "libcublas.so.12") {
		t.Errorf("cuBLAS for sm_70: %v", got)
	}
}

// TestBackendLibraries: the backend looks for the libraries its driver and
// its GPU can use: no CUDA 13 files under a CUDA 12 driver or on Volta.
func TestBackendLibraries(t *testing.T) {
	for _, c := range []struct {
		driver, arch int
		want13       bool
	}{{13000, 90, true}, {12040, 90, false}, {13000, 70, false}} {
		rtc, blas := (&Backend{arch: c.arch}).libraries(c.driver)
		if slices.Contains(rtc.Files, "libnvrtc.so.13") != c.want13 || slices.Contains(blas.Files, "libcublas.so.13") != c.want13 {
			t.Errorf("driver %d, sm_%d: NVRTC %v, cuBLAS %v", c.driver, c.arch, rtc.Files, blas.Files)
		}
	}
}

// TestSameRelease: in a folder holding two CUDA releases, the companions
// opened before a library are its own release's only, also when the
// library was found by its unversioned name (a symlink to the versioned
// file); an unversioned library with no versioned target keeps them all.
func TestSameRelease(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"libcublasLt.so.12", "libcublasLt.so.12.4.5.8", "libcublasLt.so.13", "libcublasLt.so.13.0.1",
		"libcublasLt.so.130", "libnvrtc-builtins.so.11.8", "libnvrtc-builtins.so.12.4", "libnvrtc-builtins.so.13.0"} {
		touch(t, dir, f)
	}
	glob := func(path string, companions ...string) []string {
		var got []string
		for _, pat := range sameRelease(path, companions) {
			m, _ := filepath.Glob(filepath.Join(dir, pat))
			for _, f := range m {
				got = append(got, filepath.Base(f))
			}
		}
		slices.Sort(got)
		return got
	}
	cases := []struct {
		lib        string
		companions []string
		want       []string
	}{
		{"libcublas.so.13", []string{"libcublasLt.so.*"}, []string{"libcublasLt.so.13", "libcublasLt.so.13.0.1"}},
		{"libcublas.so.12", []string{"libcublasLt.so.*"}, []string{"libcublasLt.so.12", "libcublasLt.so.12.4.5.8"}},
		{"libnvrtc.so.11.2", []string{"libnvrtc-builtins.so.*"}, []string{"libnvrtc-builtins.so.11.8"}},
		{"libnvrtc.so.12", []string{"libnvrtc-builtins.so.*"}, []string{"libnvrtc-builtins.so.12.4"}},
	}
	for _, tc := range cases {
		if got := glob(filepath.Join(dir, tc.lib), tc.companions...); !slices.Equal(got, tc.want) {
			t.Errorf("%s: companions %v, want %v", tc.lib, got, tc.want)
		}
	}

	// Found by its unversioned name: the symlink's target decides.
	touch(t, dir, "libcublas.so.12.4.5.8")
	if err := os.Symlink("libcublas.so.12.4.5.8", filepath.Join(dir, "libcublas.so")); err != nil {
		t.Fatal(err)
	}
	if got, want := glob(filepath.Join(dir, "libcublas.so"), "libcublasLt.so.*"), []string{"libcublasLt.so.12", "libcublasLt.so.12.4.5.8"}; !slices.Equal(got, want) {
		t.Errorf("libcublas.so -> 12: companions %v, want %v", got, want)
	}
	// Unversioned through and through: every companion, as before.
	touch(t, dir, "other/libnvrtc.so")
	if got := sameRelease(filepath.Join(dir, "other/libnvrtc.so"), []string{"libnvrtc-builtins.so.*"}); !slices.Equal(got, []string{"libnvrtc-builtins.so.*"}) {
		t.Errorf("unversioned: %v", got)
	}
}
