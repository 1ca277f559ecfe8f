package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// flagsFirst moves the flags that follow the CONFIG argument in front of
// it, so that `sweep CONFIG --output-root DIR` means what it says: the
// flag parser stops at the first argument that is not a flag. A flag's
// value moves with it (the next argument, unless the flag is boolean or
// written --name=value); "--" ends the flags, and subcommands ("compare")
// are left alone. Unknown flags move too, so the parser still names them.
// A help flag anywhere before "--" asks for the help alone, and a flag that
// wants a value but ends the arguments stays last, so that the parser says
// its value is missing rather than take CONFIG for it.
func flagsFirst(args []string, flags []cli.Flag, subcommands []*cli.Command) []string {
	if len(args) < 2 {
		return args
	}
	for _, c := range subcommands {
		if args[1] == c.Name {
			return args
		}
	}
	boolean, help := map[string]bool{}, map[string]bool{}
	for _, f := range flags {
		if _, ok := f.(*cli.BoolFlag); ok {
			for _, n := range f.Names() {
				boolean[n] = true
			}
		}
	}
	for _, n := range cli.HelpFlag.Names() {
		boolean[n], help[n] = true, true
	}
	moved := []string{args[0]}
	var positional, trailing []string
	rest := args[1:]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case a == "--":
			positional = append(positional, rest[i:]...)
			i = len(rest)
		case len(a) > 1 && strings.HasPrefix(a, "-"):
			name := strings.TrimLeft(a, "-")
			if help[name] {
				return []string{args[0], a}
			}
			if !strings.Contains(name, "=") && !boolean[name] {
				if i+1 == len(rest) {
					trailing = append(trailing, a) // its value is missing: the parser will say so
					continue
				}
				moved = append(moved, a)
				i++
				moved = append(moved, rest[i])
				continue
			}
			moved = append(moved, a)
		default:
			positional = append(positional, a)
		}
	}
	return append(append(moved, positional...), trailing...)
}
