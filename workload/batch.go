package workload

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/tokenizer"
)

// ExperimentFiles lists the experiment files to process in dir: the one of
// workload name, or with name "all" every workload file of the folder in
// name order. Files without buckets, such as sweep configs kept beside the
// workloads, are skipped; a file that is not JSON is an error, since it
// cannot be told apart from a workload with a typo.
func ExperimentFiles(dir, name string) ([]string, error) {
	if name != "all" {
		path := filepath.Join(dir, name+".json")
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("workload %q: %w", name, err)
		}
		if err := checkJSON(path, data); err != nil {
			return nil, err
		}
		if !IsWorkload(data) {
			return nil, fmt.Errorf("%s is not a workload (it has no buckets field)", path)
		}
		return []string{path}, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("experiments: %w", err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		// Skipping it in silence would drop a workload with a typo.
		if err := checkJSON(path, data); err != nil {
			return nil, err
		}
		if IsWorkload(data) {
			out = append(out, path)
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		return nil, fmt.Errorf("no workload files (JSON with a buckets field) in %s", dir)
	}
	return out, nil
}

// checkJSON returns an error naming path when data is not JSON.
func checkJSON(path string, data []byte) error {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("%s is not valid JSON: %w", path, err)
	}
	return nil
}

// Batch generates, verifies or exports the workloads of several experiment
// files with what they share: the prompt folder, the tokenizer settings,
// and the tokenizers already loaded (a large tokenizer.json takes a while
// to load, and several workloads name the same one). It is cmd/genprompts'
// library; each method prints one line per workload to Out, as
// serving-inference's generate_prompts.py does.
type Batch struct {
	// Dir is the folder of prompt files and their sidecars.
	Dir string
	// Tokenizer, when set, is used for every workload instead of each
	// experiment file's own (a spec for [tokenizer.Load]).
	Tokenizer string
	// LoadOptions say where [tokenizer.Load] looks for a tokenizer.
	LoadOptions tokenizer.LoadOptions
	// Out gets the result lines, Notes the notes (a verification that had
	// to skip the token counts); nil discards them.
	Out, Notes io.Writer

	loaded map[string]llm.Tokenizer
}

// tokenizer loads the tokenizer of cfg, or Batch.Tokenizer, once.
func (b *Batch) tokenizer(cfg *Config) (llm.Tokenizer, error) {
	spec := cfg.Tokenizer
	if b.Tokenizer != "" {
		spec = b.Tokenizer
	}
	if tok, ok := b.loaded[spec]; ok {
		return tok, nil
	}
	tok, err := tokenizer.Load(spec, b.LoadOptions)
	if err != nil {
		return nil, fmt.Errorf("workload %s: %w", cfg.Name, err)
	}
	if b.loaded == nil {
		b.loaded = map[string]llm.Tokenizer{}
	}
	b.loaded[spec] = tok
	return tok, nil
}

// printf writes a line to w unless it is nil.
func printf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format, args...)
	}
}

// stem is the name printed for an experiment file, as the Python tool
// prints it.
func stem(path string) string { return strings.TrimSuffix(filepath.Base(path), ".json") }

// Generate writes the prompt file and sidecar of the experiment file at
// path into Dir and prints "generated NAME SHA256".
func (b *Batch) Generate(path string) error {
	cfg, err := LoadConfig(path)
	if err != nil {
		return err
	}
	tok, err := b.tokenizer(cfg)
	if err != nil {
		return err
	}
	_, digest, err := Write(b.Dir, cfg, tok)
	if err != nil {
		return err
	}
	printf(b.Out, "generated %s %s\n", stem(path), digest)
	return nil
}

// check verifies one workload. Token counts are re-checked when the
// tokenizer can be found; when the workload's own tokenizer cannot, the
// rest is still checked and a note says so (a Qwen workload can be verified
// without Qwen's files). A Batch.Tokenizer that cannot be found is an
// error, as when generating: the user named it, so a note would hide a
// typo.
func (b *Batch) check(path string) (*Config, string, error) {
	cfg, err := LoadConfig(path)
	if err != nil {
		return nil, "", err
	}
	tok, err := b.tokenizer(cfg)
	var nf *tokenizer.NotFoundError
	if b.Tokenizer == "" && errors.As(err, &nf) {
		printf(b.Notes, "note: %s: tokenizer %q not found, so the prompts were not regenerated and token counts not re-checked (row order, prompt shape and layout were)\n", cfg.Name, nf.Spec)
		tok, err = nil, nil
	}
	if err != nil {
		return nil, "", err
	}
	digest, err := Verify(b.Dir, cfg, tok)
	return cfg, digest, err
}

// Verify checks the prompt file and sidecar in Dir of the experiment file
// at path (see [Verify]; token counts only when the tokenizer is found) and
// prints "verified NAME SHA256".
func (b *Batch) Verify(path string) error {
	_, digest, err := b.check(path)
	if err != nil {
		return err
	}
	printf(b.Out, "verified %s %s\n", stem(path), digest)
	return nil
}

// ExportAIPerf verifies the workload of the experiment file at path, as
// [Batch.Verify] does, and only then writes it to dir as NAME.aiperf.jsonl
// ([WriteAIPerf]), printing "exported NAME FILE": a file that does not
// verify is not what its name says.
func (b *Batch) ExportAIPerf(path, dir string) error {
	cfg, _, err := b.check(path)
	var nf *tokenizer.NotFoundError
	if errors.As(err, &nf) {
		return err // generating first would not help
	}
	if err != nil {
		return fmt.Errorf("%w (generate the workload before exporting it)", err)
	}
	data, err := os.ReadFile(PathsIn(b.Dir, cfg).Data)
	if err != nil {
		return err
	}
	rows, err := ParseRows(data)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	out := filepath.Join(dir, cfg.Name+".aiperf.jsonl")
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := WriteAIPerf(f, rows); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	printf(b.Out, "exported %s %s\n", stem(path), out)
	return nil
}
