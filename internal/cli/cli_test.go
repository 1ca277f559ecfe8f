package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	ucli "github.com/urfave/cli/v2"
)

// TestEmbedderLinksNoCLI: a program that embeds tinyserve (Open and
// openai.NewHandler, as examples/embed does) links no CLI library; the
// engine flags live here, in an internal package, for that reason.
func TestEmbedderLinksNoCLI(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to list dependencies with")
	}
	for _, pkg := range []string{"github.com/tinyserve/tinyserve", "github.com/tinyserve/tinyserve/openai", "github.com/tinyserve/tinyserve/examples/embed"} {
		out, err := exec.Command(goBin, "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, cli := range []string{"github.com/urfave/cli", "github.com/cpuguy83/go-md2man", "github.com/russross/blackfriday"} {
				if strings.HasPrefix(dep, cli) {
					t.Errorf("%s links %s", pkg, dep)
				}
			}
		}
	}
}

// TestCommandsImportNoBackend: the commands reach the backends only
// through tinyserve.Open (Config.Backend), so that the root package stays
// the one place that knows them.
func TestCommandsImportNoBackend(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to list imports with")
	}
	out, err := exec.Command(goBin, "list", "-f", `{{range .Imports}}{{$.ImportPath}} {{.}}{{"\n"}}{{end}}`, "github.com/tinyserve/tinyserve/cmd/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		for _, backend := range []string{"/llm/cpu", "/llm/cuda", "/llm/mock"} {
			if strings.HasSuffix(line, backend) {
				t.Errorf("%s", strings.Replace(line, " ", " imports ", 1))
			}
		}
	}
}

// appFlags are flags as an app has them: booleans (one with an alias),
// flags with values, and a command.
func appFlags() ([]ucli.Flag, []*ucli.Command) {
	return []ucli.Flag{
			&ucli.BoolFlag{Name: "verbose"},
			&ucli.BoolFlag{Name: "enforce-eager"},
			&ucli.StringFlag{Name: "output-root"},
			&ucli.StringFlag{Name: "model"},
			&ucli.IntFlag{Name: "port"},
			&ucli.IntFlag{Name: "tensor-parallel-size", Aliases: []string{"tp"}},
		}, []*ucli.Command{
			{Name: "health"},
		}
}

// TestReorder: flags move ahead of the arguments with their values; a
// command keeps the rest of the line; help alone; a value flag at the end
// stays last; and with first, the first argument becomes that flag.
func TestReorder(t *testing.T) {
	flags, commands := appFlags()
	for _, tc := range []struct {
		first    string
		in, want []string
		err      string
	}{
		{"", []string{"p"}, []string{"p"}, ""},
		{"", []string{"p", "c.json", "--output-root", "/x", "--verbose"}, []string{"p", "--output-root", "/x", "--verbose", "c.json"}, ""},
		{"", []string{"p", "c.json", "-tp", "2", "extra"}, []string{"p", "-tp", "2", "c.json", "extra"}, ""},
		{"", []string{"p", "c.json", "--", "--verbose"}, []string{"p", "c.json", "--", "--verbose"}, ""},
		{"", []string{"p", "--port", "1", "health", "--port", "2"}, []string{"p", "--port", "1", "health", "--port", "2"}, ""},
		{"", []string{"p", "c.json", "--port"}, []string{"p", "c.json", "--port"}, ""},
		{"", []string{"p", "c.json", "--help", "--port", "1"}, []string{"p", "--help"}, ""},
		{"", []string{"p", "--unknown", "v", "c.json"}, []string{"p", "--unknown", "v", "c.json"}, ""},
		{"model", []string{"p", "--port", "1", "gpt2", "--enforce-eager"}, []string{"p", "--model", "gpt2", "--port", "1", "--enforce-eager"}, ""},
		{"model", []string{"p", "gpt2", "extra", "--port", "1"}, []string{"p", "--model", "gpt2", "--port", "1", "extra"}, ""},
		{"model", []string{"p", "--port", "1", "health"}, []string{"p", "--port", "1", "health"}, ""},
		{"model", []string{"p", "--", "gpt2"}, []string{"p", "--", "gpt2"}, ""},
		{"model", []string{"p", "gpt2", "--model=x"}, nil, `the model is given twice: "gpt2" and --model=x`},
		{"model", []string{"p", "-model", "x", "gpt2"}, nil, "given twice"},
	} {
		got, err := Reorder(tc.in, flags, commands, tc.first)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Reorder(%q, %q) error %v, want %q", tc.in, tc.first, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("Reorder(%q, %q) = %q, %v; want %q", tc.in, tc.first, got, err, tc.want)
		}
	}
}

func TestExitCode(t *testing.T) {
	failed := WithExitCode(errors.New("3 of 10 requests failed"), ExitFailedRequests)
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{errors.New("bad flag"), ExitFailure},
		{failed, ExitFailedRequests},
		{fmt.Errorf("sweep: %w", failed), ExitFailedRequests},
	} {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
	if WithExitCode(nil, ExitFailedRequests) != nil {
		t.Error("WithExitCode(nil) is not nil")
	}
	if failed.Error() != "3 of 10 requests failed" {
		t.Errorf("the message changed: %q", failed)
	}
}

func TestEnv(t *testing.T) {
	if got := EnvVar("max-num-seqs"); got != "TINYSERVE_MAX_NUM_SEQS" {
		t.Errorf("EnvVar = %q", got)
	}
	flags := EngineFlags(true)
	got := SettingsFromEnv([]string{"TINYSERVE_BACKEND=mock", "TINYSERVE_OUTPUT_ROOT=/x", "PATH=/bin", "TINYSERVE_MAX_NUM_SEQS=4"}, flags)
	if want := []string{"TINYSERVE_BACKEND", "TINYSERVE_MAX_NUM_SEQS"}; !slices.Equal(got, want) {
		t.Errorf("SettingsFromEnv = %q, want %q", got, want)
	}
	for _, f := range EngineFlags(false) {
		if ev, ok := f.(interface{ GetEnvVars() []string }); ok && len(ev.GetEnvVars()) > 0 {
			t.Errorf("EngineFlags(false): --%s has variables %q", f.Names()[0], ev.GetEnvVars())
		}
	}
}

func TestNewLogger(t *testing.T) {
	var b bytes.Buffer
	lg, err := NewLogger(&b, "json", "warn")
	if err != nil {
		t.Fatal(err)
	}
	lg.Info("hidden")
	lg.Warn("shown")
	if s := b.String(); strings.Contains(s, "hidden") || !strings.Contains(s, `"msg":"shown"`) {
		t.Errorf("logs: %s", s)
	}
	if _, err := NewLogger(&b, "xml", "info"); err == nil || !strings.Contains(err.Error(), "--log-format") {
		t.Errorf("xml: %v", err)
	}
	if _, err := NewLogger(&b, "text", "loud"); err == nil || !strings.Contains(err.Error(), "--log-level") {
		t.Errorf("loud: %v", err)
	}
}

func TestChecks(t *testing.T) {
	if err := CheckRange("--port", 70000, 0, 65535); err == nil || err.Error() != "--port must be in [0, 65535], got 70000" {
		t.Errorf("--port 70000: %v", err)
	}
	if err := CheckRange("--port", 0, 0, 65535); err != nil {
		t.Errorf("--port 0: %v", err)
	}
	if err := CheckPositive("--drain-timeout", 0); err == nil || err.Error() != "--drain-timeout must be positive, got 0s" {
		t.Errorf("--drain-timeout 0s: %v", err)
	}
}
