package model

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tinyserve/tinyserve/llm/tensor"
)

// ollamaStore lays out an ollama models folder under root holding the
// GGUF file at path as name:tag (manifest and blobs, as ollama pull
// leaves them) and returns the blob's path.
func ollamaStore(t *testing.T, root, host, ns, name, tag, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	blob := filepath.Join(root, "blobs", "sha256-"+digest)
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(blob, data, 0o644); err != nil {
		t.Fatal(err)
	}
	manifest := `{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",
"config":{"mediaType":"application/vnd.docker.container.image.v1+json","digest":"sha256:` + strings.Repeat("0", 64) + `","size":1},
"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:` + digest + `","size":1},
{"mediaType":"application/vnd.ollama.image.template","digest":"sha256:` + strings.Repeat("1", 64) + `","size":1}]}`
	mp := filepath.Join(root, "manifests", host, ns, name, tag)
	if err := os.MkdirAll(filepath.Dir(mp), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mp, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	return blob
}

// tinyGGUF writes a qwen3-tiny-shaped model (smallGGUFModel) as a GGUF file
// of type typ.
func tinyGGUF(t *testing.T, typ tensor.DType) string {
	m := smallGGUFModel(t, "../../testdata/qwen3-tiny", tensor.F32)
	meta, ts, err := GGUFTensors(m, GGUFOptions{Type: typ})
	if err != nil {
		t.Fatal(err)
	}
	return writeGGUFFile(t, "qwen3-tiny.gguf", meta, ts)
}

func TestOllamaNames(t *testing.T) {
	root := filepath.Join(t.TempDir(), "models")
	path := tinyGGUF(t, tensor.Q8_0)
	blob := ollamaStore(t, root, "registry.ollama.ai", "library", "tiny", "q8_0", path)
	nsBlob := ollamaStore(t, root, "registry.ollama.ai", "someone", "tiny", "latest", path)
	hostBlob := ollamaStore(t, root, "example.com:5000", "ns", "tiny", "v1", path)
	env := map[string]string{"OLLAMA_MODELS": root, "HF_HUB_CACHE": t.TempDir()}
	getenv := func(k string) string { return env[k] }
	for name, want := range map[string]string{"tiny:q8_0": blob, "someone/tiny": nsBlob, "example.com:5000/ns/tiny:v1": hostBlob} {
		src, err := Resolve(name, ResolveOptions{Getenv: getenv})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if src.GGUF != want || src.Name != name || src.Tokenizer != want {
			t.Errorf("%s: %+v, want the blob %s", name, src, want)
		}
	}
	src, _ := Resolve("tiny:q8_0", ResolveOptions{Getenv: getenv})
	m, err := Open(src, "")
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "tiny:q8_0" || m.Weights.Layers[0].Up[0].W.DType != tensor.Q8_0 || m.Info().Source == nil {
		t.Errorf("opened %q with %s weights", m.Name, m.Weights.Layers[0].Up[0].W.DType)
	}
	m.Close()

	// ~/.ollama/models without $OLLAMA_MODELS.
	home := t.TempDir()
	ollamaStore(t, filepath.Join(home, ".ollama", "models"), "registry.ollama.ai", "library", "tiny", "latest", path)
	if src, err := Resolve("tiny", ResolveOptions{Getenv: func(k string) string { return map[string]string{"HOME": home}[k] }}); err != nil || src.GGUF == "" {
		t.Errorf("tiny from ~/.ollama: %+v, %v", src, err)
	}

	// A name it does not hold lists where it looked.
	_, err = Resolve("tiny:q4_k_m", ResolveOptions{Getenv: getenv})
	var nf *NotFoundError
	if !errors.As(err, &nf) || !strings.Contains(err.Error(), filepath.Join(root, "manifests", "registry.ollama.ai", "library", "tiny", "q4_k_m")) ||
		!strings.Contains(err.Error(), "nor an ollama model") {
		t.Errorf("missing tag: %v", err)
	}
	// A path-like name is never an ollama name.
	if _, err := Resolve("../../etc:passwd", ResolveOptions{Getenv: getenv}); err == nil || strings.Contains(err.Error(), "ollama") {
		t.Errorf("../../etc:passwd: %v", err)
	}
}

func TestOllamaRefusals(t *testing.T) {
	root := filepath.Join(t.TempDir(), "models")
	getenv := func(k string) string { return map[string]string{"OLLAMA_MODELS": root}[k] }
	// ollama's default tags are Q4_K_M: found, then refused naming the types.
	ollamaStore(t, root, "registry.ollama.ai", "library", "q4", "latest", q4kFile(t, t.TempDir()))
	src, err := Resolve("q4", ResolveOptions{Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(src, ""); err == nil || !strings.Contains(err.Error(), "Q4_K") || !strings.Contains(err.Error(), "Q4_K_M") {
		t.Errorf("Q4_K_M model: %v", err)
	}
	// A manifest whose blob is missing (an interrupted pull).
	blob := ollamaStore(t, root, "registry.ollama.ai", "library", "gone", "latest", tinyGGUF(t, tensor.F32))
	if err := os.Remove(blob); err != nil {
		t.Fatal(err)
	}
	if _, err := Resolve("gone", ResolveOptions{Getenv: getenv}); err == nil || !strings.Contains(err.Error(), "which is missing") {
		t.Errorf("missing blob: %v", err)
	}
	// A manifest without a model layer.
	mp := filepath.Join(root, "manifests", "registry.ollama.ai", "library", "empty", "latest")
	os.MkdirAll(filepath.Dir(mp), 0o755)
	os.WriteFile(mp, []byte(`{"layers":[{"mediaType":"application/vnd.ollama.image.license","digest":"sha256:00"}]}`), 0o644)
	if _, err := Resolve("empty", ResolveOptions{Getenv: getenv}); err == nil || !strings.Contains(err.Error(), "no layer of media type application/vnd.ollama.image.model") {
		t.Errorf("no model layer: %v", err)
	}
}

func TestResolveGGUFPaths(t *testing.T) {
	path := tinyGGUF(t, tensor.F32)
	src, err := Resolve(path, ResolveOptions{})
	if err != nil || src.GGUF != path || src.Name != "qwen3-tiny" || src.Dir != filepath.Dir(path) {
		t.Errorf("file: %+v, %v", src, err)
	}
	// A folder holding one .gguf (and no config.json) is that file.
	if src, err := Resolve(filepath.Dir(path), ResolveOptions{}); err != nil || src.GGUF != path {
		t.Errorf("folder: %+v, %v", src, err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "other.gguf"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Resolve(filepath.Dir(path), ResolveOptions{}); err == nil || !strings.Contains(err.Error(), "holds 2 GGUF files") {
		t.Errorf("two files: %v", err)
	}
	if _, err := Resolve(path, ResolveOptions{LoadFormat: LoadSafetensors}); err == nil || !strings.Contains(err.Error(), "does not read GGUF") {
		t.Errorf("load format: %v", err)
	}
	m, err := OpenWith(path, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if info := m.Info(); info.Source == nil || info.Source.Files[0] != "qwen3-tiny.gguf" {
		t.Errorf("info source %+v", info.Source)
	}
}
