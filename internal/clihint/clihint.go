// Package clihint turns urfave/cli's usage errors into one helpful line:
// an unknown flag is answered with the nearest flag the program has ("did
// you mean --max-num-seqs?"), and a flag written in a sweep config's JSON
// spelling (max_num_seqs) is pointed at its command-line spelling, instead
// of the whole help text.
package clihint

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// OnUsageError is a cli.OnUsageErrorFunc: set it as an App's (and a
// Command's) OnUsageError. Errors other than an unknown flag are returned
// unchanged, with a pointer to --help.
func OnUsageError(c *cli.Context, err error, _ bool) error {
	const undefined = "flag provided but not defined: "
	msg := err.Error()
	i := strings.Index(msg, undefined)
	if i < 0 {
		return fmt.Errorf("%w (--help lists every flag)", err)
	}
	name := strings.TrimLeft(msg[i+len(undefined):], "-")
	return fmt.Errorf("unknown flag --%s; %s", name, Suggest(name, flagNames(c)))
}

// Suggest says which of names the mistyped name most likely meant: the
// same name with dashes for underscores (the JSON spelling), else the
// nearest by edit distance when it is close, else where to look.
func Suggest(name string, names []string) string {
	dashed := strings.ReplaceAll(name, "_", "-")
	best, bestDist := "", -1
	for _, n := range names {
		if n == dashed && dashed != name {
			return fmt.Sprintf("--%s is the JSON spelling (sweep configs); the flag is --%s", name, n)
		}
		if d := distance(dashed, n); bestDist < 0 || d < bestDist {
			best, bestDist = n, d
		}
	}
	// Close means a few edits, fewer than half the name: a guess further
	// off is noise.
	if best != "" && bestDist <= max(2, len(dashed)/3) {
		return fmt.Sprintf("did you mean --%s? (--help lists every flag)", best)
	}
	return "--help lists every flag"
}

// flagNames lists every name and alias of the flags in scope: the
// command's and the app's.
func flagNames(c *cli.Context) []string {
	var flags []cli.Flag
	if c.Command != nil {
		flags = append(flags, c.Command.Flags...)
	}
	if c.App != nil {
		flags = append(flags, c.App.Flags...)
	}
	var names []string
	for _, f := range flags {
		names = append(names, f.Names()...)
	}
	return names
}

// distance is the Levenshtein edit distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
