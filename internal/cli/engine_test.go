package cli

import (
	"os"
	"strings"
	"testing"

	ucli "github.com/urfave/cli/v2"

	"github.com/tinyserve/tinyserve"
)

// TestConfigFromFlagsRefusesBadValues: every numeric engine flag refuses a
// negative value with an error naming the flag (the first bad one, in flag
// order), before anything is loaded. (Moved from the root package with
// the flags.)
func TestConfigFromFlagsRefusesBadValues(t *testing.T) {
	run := func(args ...string) error {
		app := &ucli.App{Flags: EngineFlags(true), Action: func(c *ucli.Context) error {
			_, err := ReadConfig(c)
			return err
		}}
		return app.Run(append([]string{"x"}, args...))
	}
	for _, flag := range []string{"max-num-seqs", "max-num-batched-tokens", "block-size", "num-blocks", "max-model-len", "max-pending", "kv-cache-bytes", "threads"} {
		err := run("--"+flag, "-1")
		if err == nil || !strings.Contains(err.Error(), "--"+flag+" must not be negative") {
			t.Errorf("--%s -1: %v", flag, err)
		}
	}
	if err := run("--max-num-seqs", "-1"); err == nil || err.Error() != "--max-num-seqs must not be negative, got -1" {
		t.Errorf("--max-num-seqs -1: %v", err)
	}
	for range 5 {
		if err := run("--threads", "-1", "--max-num-seqs", "-2"); err == nil || !strings.Contains(err.Error(), "--max-num-seqs") {
			t.Fatalf("two bad flags: %v; want the first in flag order, --max-num-seqs", err)
		}
	}
	if err := run("--gpu-memory-utilization", "1.5"); err == nil || !strings.Contains(err.Error(), "--gpu-memory-utilization") {
		t.Errorf("--gpu-memory-utilization 1.5: %v", err)
	}
	if err := run("--gpu-memory-utilization", "0"); err == nil || err.Error() != "--gpu-memory-utilization must be in (0, 1], got 0" {
		t.Errorf("--gpu-memory-utilization 0: %v", err)
	}
}

// TestConfigFromFlagsMockModel: with --backend mock, the --model flag's
// default stands for no model (the mock's own), but a --model the user gave,
// even the default's name, is passed on for Open to refuse.
func TestConfigFromFlagsMockModel(t *testing.T) {
	parse := func(args ...string) tinyserve.Config {
		t.Helper()
		return parseEngineFlags(t, args...)
	}
	if m := parse("--backend", "mock").Model; m != "" {
		t.Errorf("--backend mock: model %q, want none", m)
	}
	if m := parse("--backend", "mock", "--model", tinyserve.DefaultModel).Model; m != tinyserve.DefaultModel {
		t.Errorf("--backend mock --model %s: model %q, want it kept", tinyserve.DefaultModel, m)
	}
	if m := parse("--backend", "cpu").Model; m != tinyserve.DefaultModel {
		t.Errorf("--backend cpu: model %q, want %s", m, tinyserve.DefaultModel)
	}
	// --gpu-memory-utilization's default is cuda's alone; given for another
	// backend, it is passed on for Open to refuse.
	for _, c := range []struct {
		args []string
		want float64
	}{
		{[]string{"--backend", "cuda"}, 0.9},
		{[]string{"--backend", "cpu"}, 0},
		{[]string{"--backend", "mock"}, 0},
		{[]string{"--backend", "cpu", "--gpu-memory-utilization", "0.5"}, 0.5},
	} {
		if got := parse(c.args...).GPUMemoryUtilization; got != c.want {
			t.Errorf("%v: gpu_memory_utilization %v, want %v", c.args, got, c.want)
		}
	}
}

// TestPrefixCachingFlags: the flag and its environment variable reach
// Config.EnablePrefixCaching, which is off by default (the JSON key: the
// root package's TestPrefixCachingSettings).
func TestPrefixCachingFlags(t *testing.T) {
	parse := func(env map[string]string, args ...string) tinyserve.Config {
		t.Helper()
		return parseEngineFlagsEnv(t, env, args...)
	}
	if parse(nil).EnablePrefixCaching {
		t.Error("prefix caching on by default")
	}
	if !parse(nil, "--enable-prefix-caching").EnablePrefixCaching {
		t.Error("--enable-prefix-caching ignored")
	}
	if !parse(map[string]string{"TINYSERVE_ENABLE_PREFIX_CACHING": "true"}).EnablePrefixCaching {
		t.Error("TINYSERVE_ENABLE_PREFIX_CACHING ignored")
	}
}

// TestQuantizationFlag: --quantization and its environment variable reach
// Config.Quantization (the rest: the root package's
// TestQuantizationSetting).
func TestQuantizationFlag(t *testing.T) {
	if c := parseEngineFlagsEnv(t, nil, "--quantization", "q8_0"); c.Quantization != "q8_0" {
		t.Errorf("--quantization: %q", c.Quantization)
	}
	if c := parseEngineFlagsEnv(t, map[string]string{"TINYSERVE_QUANTIZATION": "q8_0"}); c.Quantization != "q8_0" {
		t.Errorf("TINYSERVE_QUANTIZATION: %q", c.Quantization)
	}
}

// TestEveryFlagReachesConfig: each engine flag, and its variable, sets the
// field its setting names, so a setting added to the table needs nothing
// more to work on the command line.
func TestEveryFlagReachesConfig(t *testing.T) {
	given := map[string]string{"backend": "cuda"} // so that gpu-memory-utilization is kept
	want := tinyserve.Config{Backend: "cuda"}
	var args []string
	for _, s := range tinyserve.Settings() {
		if s.OwnFlag {
			continue
		}
		var v string
		switch p := s.Field(&want).(type) {
		case *string:
			if s.Name != "backend" {
				*p, v = "x-"+s.Name, "x-"+s.Name
			}
		case *int:
			*p, v = 7, "7"
		case *int64:
			*p, v = 8, "8"
		case *float64:
			*p, v = 0.5, "0.5"
		case *bool:
			*p, v = true, "true"
		}
		if v != "" {
			given[s.Name] = v
		}
	}
	for name, v := range given {
		args = append(args, "--"+name+"="+v)
	}
	if got := parseEngineFlags(t, args...); !sameSettings(got, want) {
		t.Errorf("flags: got %+v\nwant %+v", got, want)
	}
	env := map[string]string{}
	for name, v := range given {
		env[EnvVar(name)] = v
	}
	if got := parseEngineFlagsEnv(t, env); !sameSettings(got, want) {
		t.Errorf("variables: got %+v\nwant %+v", got, want)
	}
}

// TestSeedFlag: a setting marked OwnFlag is read when the command adds its
// flag, set only when given, and checked by its rule.
func TestSeedFlag(t *testing.T) {
	seed, _ := tinyserve.SettingNamed("seed")
	run := func(args ...string) (cfg tinyserve.Config, err error) {
		app := &ucli.App{Flags: append(EngineFlags(false), SettingFlag(seed, false)), Action: func(c *ucli.Context) error {
			cfg, err = ReadConfig(c)
			return err
		}}
		if rerr := app.Run(append([]string{"x"}, args...)); rerr != nil && err == nil {
			err = rerr
		}
		return cfg, err
	}
	if c, err := run(); err != nil || c.Seed != nil {
		t.Errorf("no --seed: %v %v", c.Seed, err)
	}
	if c, err := run("--seed", "0"); err != nil || c.Seed == nil || *c.Seed != 0 {
		t.Errorf("--seed 0: %v %v", c.Seed, err)
	}
	if _, err := run("--seed", "-1"); err == nil || err.Error() != "--seed must not be negative, got -1" {
		t.Errorf("--seed -1: %v", err)
	}
	for _, f := range EngineFlags(false) {
		if f.Names()[0] == "seed" {
			t.Error("--seed is among the shared engine flags; cmd/generate's --seed is a request's")
		}
	}
}

func sameSettings(a, b tinyserve.Config) bool {
	for _, s := range tinyserve.Settings() {
		if s.Value(&a) != s.Value(&b) {
			return false
		}
	}
	return true
}

// parseEngineFlags is ReadConfig on args, with none of the engine's
// TINYSERVE_ variables set, failing the test on an error.
func parseEngineFlags(t *testing.T, args ...string) tinyserve.Config {
	t.Helper()
	return parseEngineFlagsEnv(t, nil, args...)
}

// parseEngineFlagsEnv is parseEngineFlags with the variables in env set
// (and no other engine variable: the tests do not depend on the shell).
func parseEngineFlagsEnv(t *testing.T, env map[string]string, args ...string) tinyserve.Config {
	t.Helper()
	for _, f := range EngineFlags(true) {
		if ev, ok := f.(interface{ GetEnvVars() []string }); ok {
			for _, name := range ev.GetEnvVars() {
				t.Setenv(name, "") // restored when the test ends
				os.Unsetenv(name)
			}
		}
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	var cfg tinyserve.Config
	app := &ucli.App{Flags: EngineFlags(true), Action: func(c *ucli.Context) (err error) {
		cfg, err = ReadConfig(c)
		return err
	}}
	if err := app.Run(append([]string{"x"}, args...)); err != nil {
		t.Fatal(err)
	}
	return cfg
}
