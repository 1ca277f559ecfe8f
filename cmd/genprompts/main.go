// Command genprompts turns experiment files into deterministic prompt files
// with SHA-256 sidecars, verifies them, and exports them for other load
// generators. Output is byte-identical to serving-inference's
// generate_prompts.py for the same experiment and tokenizer.
//
//	go run ./cmd/genprompts                       # generate every workload in experiments/
//	go run ./cmd/genprompts --verify              # re-check prompts/ (and token counts)
//	go run ./cmd/genprompts --workload short --tokenizer ./qwen/tokenizer.json
//	go run ./cmd/genprompts --workload latency_c1 --export aiperf
//
// Tokenizers are found offline: "gpt2" is built in; otherwise a tokenizer.json
// path, a model folder, or a Hugging Face id in the local cache or under
// --tokenizer-dir (see docs/workload.md). Nothing is downloaded.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/tinyserve/tinyserve/internal/clihint"
	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/tokenizer"
	"github.com/tinyserve/tinyserve/workload"
)

func main() {
	if err := newApp(os.Stdout, os.Stderr, os.Getenv).Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "genprompts:", err)
		os.Exit(1)
	}
}

func env(name string) []string { return []string{"TINYSERVE_" + name} }

func newApp(stdout, stderr io.Writer, getenv func(string) string) *cli.App {
	return &cli.App{
		OnUsageError: clihint.OnUsageError, // one line naming the nearest flag, not the whole help
		Name:         "genprompts",
		Usage:        "generate, verify or export deterministic prompt files from experiment files",
		Writer:       stdout,
		ErrWriter:    stderr,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "experiments", Value: "experiments", EnvVars: env("EXPERIMENTS"), Usage: "folder of experiment files (<workload>.json)"},
			&cli.StringFlag{Name: "workload", Value: "all", EnvVars: env("WORKLOAD"), Usage: "workload name, or all: every .json in --experiments with a buckets field"},
			&cli.StringFlag{Name: "output-dir", Value: "prompts", EnvVars: env("OUTPUT_DIR"), Usage: "folder of prompt files and sidecars"},
			&cli.StringFlag{Name: "tokenizer", EnvVars: env("TOKENIZER"), Usage: "tokenizer for every workload instead of each file's: gpt2, a tokenizer.json, a model folder or a Hugging Face id"},
			&cli.StringFlag{Name: "tokenizer-dir", EnvVars: env("TOKENIZER_DIR"), Usage: "extra folder searched for Hugging Face ids (DIR/ORG/NAME/tokenizer.json)"},
			&cli.BoolFlag{Name: "verify", EnvVars: env("VERIFY"), Usage: "check existing files instead of writing them (token counts too when the tokenizer is found)"},
			&cli.StringFlag{Name: "export", EnvVars: env("EXPORT"), Usage: "after verifying, write each workload in another tool's format: aiperf (single_turn JSONL)"},
			&cli.StringFlag{Name: "export-dir", EnvVars: env("EXPORT_DIR"), Usage: "folder for --export files (default: --output-dir)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("unexpected arguments %q (workloads are chosen with --workload)", c.Args().Slice())
			}
			r := &runner{
				stdout:    stdout,
				stderr:    stderr,
				override:  c.String("tokenizer"),
				loadOpts:  tokenizer.LoadOptionsFromEnv(getenv, c.String("tokenizer-dir")),
				loaded:    map[string]llm.Tokenizer{},
				outputDir: c.String("output-dir"),
			}
			export := c.String("export")
			if export != "" && export != "aiperf" {
				return fmt.Errorf("--export %q: the only format is aiperf", export)
			}
			exportDir := c.String("export-dir")
			if exportDir == "" {
				exportDir = r.outputDir
			}
			paths, err := experimentFiles(c.String("experiments"), c.String("workload"))
			if err != nil {
				return err
			}
			for _, path := range paths {
				switch {
				case export != "":
					err = r.export(path, exportDir)
				case c.Bool("verify"):
					err = r.verify(path)
				default:
					err = r.generate(path)
				}
				if err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// experimentFiles lists the experiment files to process: one named workload,
// or every workload file of the folder in name order (files without buckets,
// such as sweep configs, are skipped).
func experimentFiles(dir, name string) ([]string, error) {
	if name != "all" {
		path := filepath.Join(dir, name+".json")
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("workload %q: %w", name, err)
		}
		if err := checkJSON(path, data); err != nil {
			return nil, err
		}
		if !workload.IsWorkload(data) {
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
		// A file that is not JSON cannot be told apart from a workload with
		// a typo, which must not be skipped in silence.
		if err := checkJSON(path, data); err != nil {
			return nil, err
		}
		if workload.IsWorkload(data) {
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

// runner holds what one invocation shares between workloads: loaded
// tokenizers are reused (loading a large tokenizer.json takes a while).
type runner struct {
	stdout, stderr io.Writer
	override       string
	loadOpts       tokenizer.LoadOptions
	loaded         map[string]llm.Tokenizer
	outputDir      string
}

func (r *runner) tokenizer(cfg *workload.Config) (llm.Tokenizer, error) {
	spec := cfg.Tokenizer
	if r.override != "" {
		spec = r.override
	}
	if tok, ok := r.loaded[spec]; ok {
		return tok, nil
	}
	tok, err := tokenizer.Load(spec, r.loadOpts)
	if err != nil {
		return nil, fmt.Errorf("workload %s: %w", cfg.Name, err)
	}
	r.loaded[spec] = tok
	return tok, nil
}

// stem is the name printed for an experiment file, as the Python tool
// prints it.
func stem(path string) string { return strings.TrimSuffix(filepath.Base(path), ".json") }

func (r *runner) generate(path string) error {
	cfg, err := workload.LoadConfig(path)
	if err != nil {
		return err
	}
	tok, err := r.tokenizer(cfg)
	if err != nil {
		return err
	}
	_, digest, err := workload.Write(r.outputDir, cfg, tok)
	if err != nil {
		return err
	}
	fmt.Fprintf(r.stdout, "generated %s %s\n", stem(path), digest)
	return nil
}

// check verifies one workload. Token counts are re-checked when the
// tokenizer can be found; when the workload's own tokenizer cannot, the
// rest is still checked and a note says so (a Qwen workload can be verified
// without Qwen's files). A --tokenizer that cannot be found is an error, as
// when generating: the user named it, so a note would hide a typo.
func (r *runner) check(path string) (*workload.Config, string, error) {
	cfg, err := workload.LoadConfig(path)
	if err != nil {
		return nil, "", err
	}
	tok, err := r.tokenizer(cfg)
	var nf *tokenizer.NotFoundError
	if r.override == "" && errors.As(err, &nf) {
		fmt.Fprintf(r.stderr, "note: %s: tokenizer %q not found, so the prompts were not regenerated and token counts not re-checked (row order, prompt shape and layout were)\n", cfg.Name, nf.Spec)
		tok, err = nil, nil
	}
	if err != nil {
		return nil, "", err
	}
	digest, err := workload.Verify(r.outputDir, cfg, tok)
	return cfg, digest, err
}

func (r *runner) verify(path string) error {
	_, digest, err := r.check(path)
	if err != nil {
		return err
	}
	fmt.Fprintf(r.stdout, "verified %s %s\n", stem(path), digest)
	return nil
}

func (r *runner) export(path, dir string) error {
	cfg, _, err := r.check(path)
	var nf *tokenizer.NotFoundError
	if errors.As(err, &nf) {
		return err // generating first would not help
	}
	if err != nil {
		return fmt.Errorf("%w (generate the workload before exporting it)", err)
	}
	data, err := os.ReadFile(workload.PathsIn(r.outputDir, cfg).Data)
	if err != nil {
		return err
	}
	rows, err := workload.ParseRows(data)
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
	if err := workload.WriteAIPerf(f, rows); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(r.stdout, "exported %s %s\n", stem(path), out)
	return nil
}
