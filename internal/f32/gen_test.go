//go:build amd64

package f32

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedKernelsUpToDate runs the generator in a scratch folder and
// compares its output with the committed kernels_amd64.s, so that an edit
// to gen.go without `go generate`, or by hand to the assembly, fails here
// instead of shipping kernels that their source does not describe.
func TestGeneratedKernelsUpToDate(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to run the generator")
	}
	dir := t.TempDir()
	for _, f := range []string{"gen.go", "gen_vector.go", "gen_q8.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(goTool, "run", "gen.go", "gen_vector.go", "gen_q8.go")
	cmd.Dir = dir
	// The scratch folder is outside any module: the project's flags (build
	// tags, -mod) are not the generator's.
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run gen.go gen_vector.go gen_q8.go: %v\n%s", err, out)
	}
	got, err := os.ReadFile(filepath.Join(dir, "kernels_amd64.s"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("kernels_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	// A checkout that converts line endings (Git on Windows) still holds
	// the same assembly.
	want = bytes.ReplaceAll(want, []byte("\r\n"), []byte("\n"))
	if !bytes.Equal(got, want) {
		t.Fatal("kernels_amd64.s is not what gen.go writes: run `go generate ./internal/f32/`")
	}
}
