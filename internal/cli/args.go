package cli

import (
	"fmt"
	"slices"
	"strings"

	ucli "github.com/urfave/cli/v2"
)

// Reorder puts a command line's flags before its arguments, because
// urfave/cli's parser stops at the first argument that is not a flag and
// leaves every flag after it unread: `sweep CONFIG --output-root DIR` and
// `tinyserve-serve MODEL --port 8001` (vllm serve's order) then mean what
// they say. flags and commands are the app's: flags tell the flags that
// take a value (the next argument, unless written --name=value) from the
// boolean ones, and when the first argument is a command (or help) the
// rest of the line is the command's and stays as it is. A flag's value
// moves with it; "--" ends the flags; unknown flags move too, so the
// parser still names them. A help flag before "--" asks for the help
// alone, and a flag that wants a value but ends the line stays last, so
// that the parser says its value is missing rather than take an argument
// for it.
//
// With a non-empty first (cmd/serve's "model"), the first argument is that
// flag's value, as `vllm serve MODEL` takes the model: it becomes --first
// ARG at the front, and the flag given both ways is an error rather than a
// silent choice.
func Reorder(args []string, flags []ucli.Flag, commands []*ucli.Command, first string) ([]string, error) {
	if len(args) < 2 {
		return args, nil
	}
	isCommand := map[string]bool{"help": true, "h": true}
	for _, c := range commands {
		for _, n := range c.Names() {
			isCommand[n] = true
		}
	}
	boolean, help := map[string]bool{}, map[string]bool{}
	for _, f := range flags {
		if _, ok := f.(*ucli.BoolFlag); ok {
			for _, n := range f.Names() {
				boolean[n] = true
			}
		}
	}
	for _, n := range ucli.HelpFlag.Names() {
		boolean[n], help[n] = true, true
	}
	for _, n := range ucli.VersionFlag.Names() {
		boolean[n] = true
	}
	var moved, positional, trailing []string
	rest := args[1:]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case a == "--" || (len(positional) == 0 && isCommand[a]):
			// The end of the flags, or a command, whose own flags follow.
			positional = append(positional, rest[i:]...)
			i = len(rest)
		case len(a) > 1 && strings.HasPrefix(a, "-"):
			name := strings.TrimLeft(a, "-")
			if help[name] {
				return []string{args[0], a}, nil
			}
			if !strings.Contains(name, "=") && !boolean[name] {
				if i+1 == len(rest) {
					trailing = append(trailing, a) // its value is missing: the parser will say so
					continue
				}
				moved = append(moved, a, rest[i+1])
				i++
				continue
			}
			moved = append(moved, a)
		default:
			positional = append(positional, a)
		}
	}
	out := []string{args[0]}
	if first != "" && len(positional) > 0 && positional[0] != "--" && !isCommand[positional[0]] {
		for _, a := range moved {
			if a == "--"+first || a == "-"+first || strings.HasPrefix(a, "--"+first+"=") || strings.HasPrefix(a, "-"+first+"=") {
				return nil, fmt.Errorf("the %s is given twice: %q and %s", first, positional[0], a)
			}
		}
		out = append(out, "--"+first, positional[0])
		positional = positional[1:]
	}
	return slices.Concat(out, moved, positional, trailing), nil
}
