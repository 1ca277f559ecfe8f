package cuda

import (
	"errors"
	"strings"
	"testing"

	"github.com/tinyserve/tinyserve/llm/gpt2"
)

func tinyModel(t testing.TB) *gpt2.Model {
	t.Helper()
	m, err := gpt2.Builtin(gpt2.BuiltinTiny)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestNewBackendWithoutLibraries: where the libraries are missing,
// NewBackend fails with an error naming what is missing and where it
// looked, and does not panic. On a machine with CUDA installed the libraries
// are found in the standard folders and the test has nothing to check.
func TestNewBackendWithoutLibraries(t *testing.T) {
	dir := t.TempDir()
	b, err := NewBackend(tinyModel(t), Options{DType: "float32", LibDir: dir, CacheDir: t.TempDir(), Getenv: func(string) string { return "" }})
	if err == nil {
		b.Close()
		t.Skip("CUDA libraries and a GPU are present; the missing-library error cannot be provoked here")
	}
	msg := err.Error()
	t.Logf("error (as a user sees it):\n%s", msg)
	var nf *NotFoundError
	switch {
	case errors.As(err, &nf):
		for _, want := range []string{nf.Lib.Name, dir, "/usr/local/cuda/lib64", EnvLibDir} {
			if !strings.Contains(msg, want) {
				t.Errorf("error does not mention %q", want)
			}
		}
	case errors.Is(err, ErrNoDevice):
	default:
		// A driver without a usable GPU (e.g. in a container): still an
		// error that names the driver's status.
		var ce *Error
		if !errors.As(err, &ce) {
			t.Errorf("error %v is neither a missing library, no device, nor a CUDA status", err)
		}
	}
}

func TestNewBackendRejectsBadOptions(t *testing.T) {
	m := tinyModel(t)
	cases := []struct {
		opts Options
		want string
	}{
		{Options{DType: "int4"}, "unknown dtype"},
		{Options{GPUMemoryUtilization: 1.5}, "GPUMemoryUtilization"},
		{Options{GPUMemoryUtilization: -0.1}, "GPUMemoryUtilization"},
		{Options{NumBlocks: -1}, "NumBlocks"},
	}
	for _, c := range cases {
		if _, err := NewBackend(m, c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.opts, err, c.want)
		}
	}
	if _, err := NewBackend(nil, Options{}); err == nil {
		t.Error("nil model accepted")
	}
}
