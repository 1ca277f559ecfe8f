package clihint

import (
	"bytes"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

func TestSuggest(t *testing.T) {
	names := []string{"max-num-seqs", "max-num-batched-tokens", "port", "host", "model"}
	for _, tc := range []struct{ typed, want string }{
		{"max-num-seq", "did you mean --max-num-seqs?"},
		{"max_num_seqs", "--max_num_seqs is the JSON spelling (sweep configs); the flag is --max-num-seqs"},
		{"prot", "did you mean --port?"},
		{"completely-unrelated", "--help lists every flag"},
	} {
		if got := Suggest(tc.typed, names); !strings.HasPrefix(got, tc.want) {
			t.Errorf("Suggest(%q) = %q, want %q...", tc.typed, got, tc.want)
		}
	}
}

// TestOnUsageErrorOneLine: an App using OnUsageError answers an unknown
// flag with one line naming the nearest flag, and prints no help text.
func TestOnUsageErrorOneLine(t *testing.T) {
	var out bytes.Buffer
	app := &cli.App{
		Name: "x", Writer: &out, ErrWriter: &out, OnUsageError: OnUsageError,
		Flags:  []cli.Flag{&cli.IntFlag{Name: "max-num-seqs"}, &cli.IntFlag{Name: "port"}},
		Action: func(*cli.Context) error { return nil },
	}
	err := app.Run([]string{"x", "--max-num-seq", "4"})
	if err == nil || err.Error() != "unknown flag --max-num-seq; did you mean --max-num-seqs? (--help lists every flag)" {
		t.Errorf("got %v", err)
	}
	if out.Len() != 0 {
		t.Errorf("help printed:\n%s", out.String())
	}
}
