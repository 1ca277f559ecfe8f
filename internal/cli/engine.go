package cli

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"

	"github.com/tinyserve/tinyserve"
)

// EngineFlags are the flags of tinyserve.Settings that every command which
// runs the engine shares (cmd/serve, cmd/generate), in the table's order;
// settings marked OwnFlag are left to the command (SettingFlag). With env,
// each flag is also read from its environment variable (EnvVar).
func EngineFlags(env bool) []ucli.Flag {
	var flags []ucli.Flag
	for _, s := range tinyserve.Settings() {
		if !s.OwnFlag {
			flags = append(flags, SettingFlag(s, env))
		}
	}
	return flags
}

// SettingFlag is the flag of one setting: --s.Name, of the setting's type,
// with its default and usage, and its environment variable with env.
func SettingFlag(s tinyserve.Setting, env bool) ucli.Flag {
	var vars []string
	if env {
		vars = EnvVars(s.Name)
	}
	var cfg tinyserve.Config
	switch s.Field(&cfg).(type) {
	case *string:
		v, _ := s.Default.(string)
		return &ucli.StringFlag{Name: s.Name, Value: v, EnvVars: vars, Usage: s.Usage}
	case *int:
		v, _ := s.Default.(int)
		return &ucli.IntFlag{Name: s.Name, Value: v, EnvVars: vars, Usage: s.Usage}
	case *int64, **uint64: // an optional number is set only when given
		v, _ := s.Default.(int64)
		return &ucli.Int64Flag{Name: s.Name, Value: v, EnvVars: vars, Usage: s.Usage}
	case *float64:
		v, _ := s.Default.(float64)
		return &ucli.Float64Flag{Name: s.Name, Value: v, EnvVars: vars, Usage: s.Usage}
	case *bool:
		return &ucli.BoolFlag{Name: s.Name, EnvVars: vars, Usage: s.Usage}
	}
	panic(fmt.Sprintf("cli: setting %s has a field of unknown type", s.Name))
}

// ReadConfig reads the settings whose flags c has (EngineFlags, and any
// SettingFlag the command added) into a Config, refusing a value that
// breaks its setting's rule; the first bad flag in the table's order is
// the one named ("--max-num-seqs must not be negative, got -1"). Two flag
// defaults are not passed on where they do not apply, so that Open, which
// refuses an option its backend would ignore, sees only what the user gave:
// --model's with --backend mock (the mock serves its own model), and
// --gpu-memory-utilization's with a backend other than cuda.
func ReadConfig(c *ucli.Context) (tinyserve.Config, error) {
	var cfg tinyserve.Config
	var bad error
	for _, s := range tinyserve.Settings() {
		if c.Value(s.Name) == nil {
			continue // not a flag of this command
		}
		var v any
		switch p := s.Field(&cfg).(type) {
		case *string:
			*p = c.String(s.Name)
		case *int:
			*p = c.Int(s.Name)
			v = *p
		case *int64:
			*p = c.Int64(s.Name)
			v = *p
		case *float64:
			*p = c.Float64(s.Name)
			v = *p
		case *bool:
			*p = c.Bool(s.Name)
		case **uint64:
			if !c.IsSet(s.Name) {
				continue
			}
			n := c.Int64(s.Name)
			v = n
			u := uint64(n)
			*p = &u
		}
		if err := s.Check("--"+s.Name, v); err != nil && bad == nil {
			bad = err
		}
	}
	if bad != nil {
		return tinyserve.Config{}, bad
	}
	if cfg.Backend == tinyserve.BackendMock && !c.IsSet("model") {
		// The flag's default does not apply to the mock, but a --model the
		// user gave, even tiny-gpt2, is passed on for Open to refuse.
		cfg.Model = ""
	}
	if cfg.Backend != tinyserve.BackendCUDA && !c.IsSet("gpu-memory-utilization") {
		// The flag's default is cuda's; given for another backend, Open
		// refuses it.
		cfg.GPUMemoryUtilization = 0
	}
	return cfg, nil
}
