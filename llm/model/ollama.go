package model

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/tinyserve/tinyserve/internal/hfhub"
)

// ollama keeps each model as a manifest naming content-addressed blobs:
//
//	<models>/manifests/<host>/<namespace>/<name>/<tag>   (JSON)
//	<models>/blobs/sha256-<hex>                           (the GGUF, a template, params, ...)
//
// where <models> is $OLLAMA_MODELS, else ~/.ollama/models. A name
// qwen2.5:0.5b-instruct-q8_0 is host registry.ollama.ai, namespace library,
// tag 0.5b-instruct-q8_0; a name without a tag has tag latest. The model's
// weights are the layer of media type application/vnd.ollama.image.model.

// OllamaModelMediaType is the media type of an ollama manifest's model
// layer: the GGUF file.
const OllamaModelMediaType = "application/vnd.ollama.image.model"

// ollamaPart is one component of an ollama name: what ollama's own name
// check accepts, and never a path element such as "..".
var ollamaPart = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$`)

// sha256Hex is a layer digest's hexadecimal part.
var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ollamaHostPart also allows a port.
var ollamaHostPart = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,79}(:[0-9]{1,5})?$`)

// OllamaDir is the folder ollama keeps its models in: $OLLAMA_MODELS,
// else ~/.ollama/models ("" when neither can be known).
func OllamaDir(getenv func(string) string) string {
	if d := getenv("OLLAMA_MODELS"); d != "" {
		return d
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".ollama", "models")
	}
	return ""
}

// ollamaManifestPath is where the manifest of an ollama name lies under
// dir, or false when name is not an ollama name.
func ollamaManifestPath(dir, name string) (string, bool) {
	tag := "latest"
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		name, tag = name[:i], name[i+1:]
	}
	parts := strings.Split(name, "/")
	switch len(parts) {
	case 1:
		parts = []string{"registry.ollama.ai", "library", parts[0]}
	case 2:
		parts = []string{"registry.ollama.ai", parts[0], parts[1]}
	case 3:
	default:
		return "", false
	}
	if !ollamaHostPart.MatchString(parts[0]) || !ollamaPart.MatchString(parts[1]) || !ollamaPart.MatchString(parts[2]) || !ollamaPart.MatchString(tag) {
		return "", false
	}
	return filepath.Join(dir, "manifests", parts[0], parts[1], parts[2], tag), true
}

// maxManifest bounds the manifest read: real ones are a few hundred bytes.
const maxManifest = 1 << 20

// locateOllama finds the GGUF blob of an ollama model name in the local
// store, read only. looked says where it looked (for a NotFoundError);
// err is set when a manifest was found but is unusable.
func locateOllama(name string, getenv func(string) string) (blob string, looked []string, err error) {
	dir := OllamaDir(getenv)
	if dir == "" {
		return "", []string{"the ollama store ($OLLAMA_MODELS and $HOME are unset)"}, nil
	}
	manifest, ok := ollamaManifestPath(dir, name)
	if !ok {
		return "", nil, nil
	}
	f, err := os.Open(manifest)
	if err != nil {
		return "", []string{manifest + " (no such ollama manifest)"}, nil
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxManifest+1))
	if err != nil {
		return "", nil, fmt.Errorf("model: ollama manifest %s: %w", manifest, err)
	}
	if len(data) > maxManifest {
		return "", nil, fmt.Errorf("%w: ollama manifest %s is larger than %d bytes", ErrBadCheckpoint, manifest, maxManifest)
	}
	var m struct {
		Layers []struct {
			MediaType string `json:"mediaType"`
			Digest    string `json:"digest"`
		} `json:"layers"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return "", nil, fmt.Errorf("%w: ollama manifest %s: %w", ErrBadCheckpoint, manifest, err)
	}
	var types []string
	for _, l := range m.Layers {
		types = append(types, l.MediaType)
		if l.MediaType != OllamaModelMediaType {
			continue
		}
		hex, ok := strings.CutPrefix(l.Digest, "sha256:")
		if !ok || !sha256Hex.MatchString(hex) {
			return "", nil, fmt.Errorf("%w: ollama manifest %s: model layer digest %q is not sha256:<64 hex digits>", ErrBadCheckpoint, manifest, l.Digest)
		}
		blob := filepath.Join(dir, "blobs", "sha256-"+hex)
		if !hfhub.IsFile(blob) {
			return "", nil, fmt.Errorf("%w: ollama manifest %s names the model blob %s, which is missing (a partial pull? run ollama pull %s)", ErrBadCheckpoint, manifest, blob, name)
		}
		return blob, nil, nil
	}
	return "", nil, fmt.Errorf("%w: ollama manifest %s has no layer of media type %s (layers: %s)", ErrBadCheckpoint, manifest, OllamaModelMediaType, strings.Join(types, ", "))
}

// ggufInFolder is the one .gguf file of a folder that has no config.json,
// "" when it has none, an error when it has several.
func ggufInFolder(dir string) (string, error) {
	if hfhub.IsFile(filepath.Join(dir, "config.json")) {
		return "", nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", nil
	}
	var found []string
	for _, e := range entries {
		if !e.IsDir() && hasGGUFExt(e.Name()) {
			found = append(found, e.Name())
		}
	}
	switch len(found) {
	case 0:
		return "", nil
	case 1:
		return filepath.Join(dir, found[0]), nil
	}
	return "", fmt.Errorf("model: folder %s holds %d GGUF files (%s): name the one to serve", dir, len(found), strings.Join(found, ", "))
}
