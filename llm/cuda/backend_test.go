package cuda

import (
	"errors"
	"strings"
	"testing"

	"github.com/tinyserve/tinyserve/llm/model"
)

func tinyModel(t testing.TB) *model.Model {
	t.Helper()
	m, err := model.Builtin(model.BuiltinTiny)
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

// TestNewBackendRejectsShapesTheKernelsCannotRun: shapes a launch would
// refuse on every step are refused at start, naming the limit. Only the
// config is read before the libraries load, so the models have no weights.
func TestNewBackendRejectsShapesTheKernelsCannotRun(t *testing.T) {
	base := tinyModel(t).Config
	for _, d := range []int{16, 64, 128, 256, 1024} {
		for _, size := range []int{2, 4} {
			if need := attentionShared(d, size) + attentionStaticShared; need > 48<<10 {
				t.Errorf("head_dim %d with %d-byte storage needs %d bytes of attention shared memory", d, size, need)
			}
		}
	}
	shape := func(mutate func(*model.Config)) *model.Model {
		c := base
		mutate(&c)
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		return &model.Model{Name: "shape", Config: c}
	}
	opts := Options{DType: "float32", LibDir: t.TempDir(), Getenv: func(string) string { return "" }}
	for _, tc := range []struct {
		name   string
		mutate func(*model.Config)
		want   string // "" for a shape that passes the check
	}{
		// Attention tiles the context: no length is too long for it.
		{"a context of a million positions", func(c *model.Config) { c.MaxPositions = 1 << 20 }, ""},
		{"head_dim 1024", func(c *model.Config) { c.Heads, c.KVHeads, c.Hidden, c.HeadDim = 1, 1, 1024, 1024 }, ""},
		{"head_dim over 1024", func(c *model.Config) { c.Heads, c.KVHeads, c.Hidden, c.HeadDim = 1, 1, 1026, 1026 }, "head_dim 1026"},
		{"heads over a grid dimension", func(c *model.Config) { c.Heads, c.KVHeads, c.Hidden, c.HeadDim = 65536, 65536, 65536, 1 }, "65535"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := NewBackend(shape(tc.mutate), opts)
			if err == nil {
				b.Close()
				t.Skip("a GPU is present: the model without weights went further")
			}
			switch {
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %q, want it to name %q", err, tc.want)
			case tc.want == "" && (strings.Contains(err.Error(), "head_dim") || strings.Contains(err.Error(), "shared memory") || strings.Contains(err.Error(), "65535")):
				t.Errorf("a shape within the limits refused: %v", err)
			}
		})
	}
}
