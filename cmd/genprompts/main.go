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
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	tcli "github.com/tinyserve/tinyserve/internal/cli"
	"github.com/tinyserve/tinyserve/internal/clihint"
	"github.com/tinyserve/tinyserve/llm/tokenizer"
	"github.com/tinyserve/tinyserve/workload"
)

func main() {
	tcli.Exit("genprompts", newApp(os.Stdout, os.Stderr, os.Getenv).Run(os.Args))
}

func newApp(stdout, stderr io.Writer, getenv func(string) string) *cli.App {
	return &cli.App{
		OnUsageError: clihint.OnUsageError, // one line naming the nearest flag, not the whole help
		Name:         "genprompts",
		Usage:        "generate, verify or export deterministic prompt files from experiment files",
		Writer:       stdout,
		ErrWriter:    stderr,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "experiments", Value: "experiments", EnvVars: tcli.EnvVars("experiments"), Usage: "folder of experiment files (<workload>.json)"},
			&cli.StringFlag{Name: "workload", Value: "all", EnvVars: tcli.EnvVars("workload"), Usage: "workload name, or all: every .json in --experiments with a buckets field"},
			&cli.StringFlag{Name: "output-dir", Value: "prompts", EnvVars: tcli.EnvVars("output-dir"), Usage: "folder of prompt files and sidecars"},
			&cli.StringFlag{Name: "tokenizer", EnvVars: tcli.EnvVars("tokenizer"), Usage: "tokenizer for every workload instead of each file's: gpt2, a tokenizer.json, a model folder or a Hugging Face id"},
			&cli.StringFlag{Name: "tokenizer-dir", EnvVars: tcli.EnvVars("tokenizer-dir"), Usage: "extra folder searched for Hugging Face ids (DIR/ORG/NAME/tokenizer.json)"},
			&cli.BoolFlag{Name: "verify", EnvVars: tcli.EnvVars("verify"), Usage: "check existing files instead of writing them (token counts too when the tokenizer is found)"},
			&cli.StringFlag{Name: "export", EnvVars: tcli.EnvVars("export"), Usage: "after verifying, write each workload in another tool's format: aiperf (single_turn JSONL)"},
			&cli.StringFlag{Name: "export-dir", EnvVars: tcli.EnvVars("export-dir"), Usage: "folder for --export files (default: --output-dir)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("unexpected arguments %q (workloads are chosen with --workload)", c.Args().Slice())
			}
			b := &workload.Batch{
				Dir:         c.String("output-dir"),
				Tokenizer:   c.String("tokenizer"),
				LoadOptions: tokenizer.LoadOptionsFromEnv(getenv, c.String("tokenizer-dir")),
				Out:         stdout,
				Notes:       stderr,
			}
			export := c.String("export")
			if export != "" && export != "aiperf" {
				return fmt.Errorf("--export %q: the only format is aiperf", export)
			}
			exportDir := c.String("export-dir")
			if exportDir == "" {
				exportDir = b.Dir
			}
			paths, err := workload.ExperimentFiles(c.String("experiments"), c.String("workload"))
			if err != nil {
				return err
			}
			for _, path := range paths {
				switch {
				case export != "":
					err = b.ExportAIPerf(path, exportDir)
				case c.Bool("verify"):
					err = b.Verify(path)
				default:
					err = b.Generate(path)
				}
				if err != nil {
					return err
				}
			}
			return nil
		},
	}
}
