package layering

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/tinyserve/tinyserve"

// A rule forbids the packages matching From to import (directly) any
// package matching one of Not, except those matching Except; packages
// matching Skip are left to a rule of their own. Patterns are
// module-relative paths; "x/..." matches x and everything under it, "."
// is the root package.
type rule struct {
	From   string
	Skip   []string // packages From matches that the rule leaves to another
	Not    []string
	Except []string
	Why    string
}

// rules are docs/architecture.md's layers, lowest first.
var rules = []rule{
	{From: "llm/...", Not: []string{".", "openai/...", "sweep/...", "workload/...", "cmd/...", "examples/...", "bench/..."},
		Why: "the engine knows nothing of HTTP, the toolkit or the CLIs"},
	{From: "llm/kv/...", Not: []string{"llm/...", "internal/..."}, Except: []string{"llm/kv/..."},
		Why: "the KV cache manager is pure"},
	{From: "llm/sched/...", Not: []string{"llm/...", "internal/..."}, Except: []string{"llm/kv", "llm/sched/..."},
		Why: "the scheduler is a pure state machine over the KV cache manager"},
	{From: "llm/engine", Not: []string{"llm/cpu/...", "llm/cuda/...", "llm/mock/...", "llm/model/...", "llm/checkpoint/...", "llm/gguf/..."},
		Why: "the engine drives any backend through its Backend interface"},
	{From: "llm/model/...", Not: []string{"llm/cpu/...", "llm/cuda/...", "llm/mock/...", "llm/engine/..."},
		Why: "the model description is what every backend executes, beneath them"},
	{From: "llm/tensor/...", Not: []string{"llm/...", "internal/..."}, Except: []string{"llm/tensor/..."},
		Why: "tensors are the bottom layer"},
	{From: "openai/...", Not: []string{".", "llm/cpu/...", "llm/cuda/...", "llm/mock/...", "llm/engine/...", "llm/model/...", "sweep/...", "workload/...", "cmd/..."},
		Why: "the HTTP handler serves any llm.Engine"},
	{From: "workload/...", Not: []string{".", "openai/...", "sweep/...", "cmd/...", "llm/cpu/...", "llm/cuda/...", "llm/mock/...", "llm/engine/...", "llm/model/..."},
		Why: "prompt files need a tokenizer, nothing of the engine"},
	{From: "sweep/...", Not: []string{".", "llm/...", "openai/...", "cmd/...", "workload/..."},
		Why: "the benchmark toolkit measures any OpenAI-compatible endpoint over HTTP"},
	{From: "sweep/internal/...", Not: []string{"sweep/..."}, Except: []string{"sweep/internal/..."},
		Why: "the toolkit's file helpers sit beneath its layers"},
	{From: "sweep/loadgen/...", Not: []string{"sweep/..."}, Except: []string{"sweep/loadgen/...", "sweep/internal/..."},
		Why: "the load generator stands alone beneath the sweep"},
	{From: "sweep/analysis/...", Not: []string{"sweep", "sweep/report/..."},
		Why: "the analysis reads finished runs; reports and the runner build on it"},
	{From: "sweep/report/...", Not: []string{"sweep"},
		Why: "the reports render the analysis; the runner calls them"},
	{From: "internal/...", Not: []string{".", "openai/...", "sweep/...", "workload/...", "cmd/...", "llm/cpu/...", "llm/cuda/...", "llm/mock/...", "llm/engine/...", "llm/model/..."},
		Skip: []string{"internal/cli"}, // below: the commands' shared layer
		Why:  "internal helpers sit beneath what uses them"},
	{From: "internal/cli", Not: []string{"llm/cpu/...", "llm/cuda/...", "llm/mock/...", "sweep/...", "workload/...", "cmd/..."},
		Why: "the commands' shared layer sits on tinyserve.Settings, beneath the commands, and knows no backend"},
	{From: "cmd/...", Not: []string{"llm/cpu/...", "llm/cuda/...", "llm/mock/..."},
		Why: "only the root package knows the backends (tinyserve.Open)"},
}

// match reports whether the module-relative path p matches pattern.
func match(pattern, p string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pattern
}

// imports lists each package of the module with its direct imports of
// the module's packages (test files left out), module-relative.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", module+"/...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	rel := func(p string) (string, bool) {
		if p == module {
			return ".", true
		}
		r, ok := strings.CutPrefix(p, module+"/")
		return r, ok
	}
	pkgs := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		from, _ := rel(f[0])
		pkgs[from] = nil
		for _, imp := range f[1:] {
			if r, ok := rel(imp); ok {
				pkgs[from] = append(pkgs[from], r)
			}
		}
	}
	return pkgs
}

// violations lists the imports in pkgs that rules forbid, and the rules
// that match no package (a rule naming a package that moved).
func violations(pkgs map[string][]string, rules []rule) []string {
	var out []string
	for _, r := range rules {
		matched := 0
		for from, imps := range pkgs {
			if !match(r.From, from) || slices.ContainsFunc(r.Skip, func(p string) bool { return match(p, from) }) {
				continue
			}
			matched++
			for _, imp := range imps {
				bad := slices.ContainsFunc(r.Not, func(n string) bool { return match(n, imp) }) &&
					!slices.ContainsFunc(r.Except, func(e string) bool { return match(e, imp) })
				if bad {
					out = append(out, from+" imports "+imp+": "+r.From+" may not ("+r.Why+")")
				}
			}
		}
		if matched == 0 {
			out = append(out, "the rule for "+r.From+" matches no package: docs/architecture.md and this test have drifted")
		}
	}
	slices.Sort(out)
	return out
}

// TestLayers: no package imports one its layer may not.
func TestLayers(t *testing.T) {
	pkgs := imports(t)
	if len(pkgs) < 30 {
		t.Fatalf("go list found %d packages: the pattern is wrong", len(pkgs))
	}
	for _, v := range violations(pkgs, rules) {
		t.Error(v)
	}
}

// TestRulesCanFail: the checker flags forbidden imports and stale rules
// (a test that could not fail would prove nothing).
func TestRulesCanFail(t *testing.T) {
	for _, c := range []struct {
		pattern, p string
		want       bool
	}{
		{"llm/...", "llm", true}, {"llm/...", "llm/cpu", true}, {"llm/...", "llmx", false},
		{".", ".", true}, {".", "openai", false}, {"llm/engine", "llm/engine/enginetest", false},
	} {
		if got := match(c.pattern, c.p); got != c.want {
			t.Errorf("match(%q, %q) = %v", c.pattern, c.p, got)
		}
	}
	bad := map[string][]string{
		"llm/engine": {"llm/kv", "llm/cpu"}, "llm/kv": nil, "llm/sched": {"llm/kv"}, "sweep/loadgen": {"sweep"},
		"cmd/serve": {".", "llm/cuda"}, "openai": {"llm"},
	}
	got := violations(bad, rules)
	want := []string{"cmd/serve imports llm/cuda", "llm/engine imports llm/cpu", "sweep/loadgen imports sweep:"}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(v string) bool { return strings.HasPrefix(v, w) }) {
			t.Errorf("not flagged: %s (got %q)", w, got)
		}
	}
	if n := len(got) - len(want); n < 1 { // rules for packages absent from bad
		t.Errorf("stale rules not flagged: %q", got)
	}
}
