package loadgen

// One condition measured into its two evidence files, the library of
// cmd/sendrequests: everything that can be refused is refused before a
// request is sent, and no file is ever replaced.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tinyserve/tinyserve/sweep/internal/files"
)

// Condition is one condition to measure into files: the load options, the
// prompt file and where the evidence goes. Its error messages name
// cmd/sendrequests' flags, whose command it is the library of (each field
// is one flag).
type Condition struct {
	// Options are the load options. An empty Model means the first model
	// the server's /v1/models lists; a nil Client one sized for the
	// condition; WorkloadSHA256 is set from Prompts.
	Options LoadOptions
	// Prompts is the prompt file; its first NumRequests rows are sent.
	Prompts     string
	NumRequests int
	// Output is the per-request JSONL, written as each request finishes.
	Output string
	// Summary is the summary JSON; empty means beside Output, as
	// NAME.summary.json ([Condition.SummaryPath]).
	Summary string
	// Progress, when set, is a terminal that shows "done/total requests,
	// seconds" on one line while the condition runs; the line is erased at
	// the end, so that what is printed next starts clean.
	Progress io.Writer
}

// SummaryPath is where the summary goes: Summary, or beside Output.
func (c *Condition) SummaryPath() string {
	if c.Summary != "" {
		return c.Summary
	}
	return strings.TrimSuffix(c.Output, filepath.Ext(c.Output)) + ".summary.json"
}

// Evidence is what a measured condition leaves besides its files.
type Evidence struct {
	// Summary is the condition's summary, as its file holds it.
	Summary *Summary
	// Records are the per-request records, as Output holds them, for the
	// caller to say which request failed first ([FirstFailure]).
	Records []Record
	// SummaryJSON is the summary as its file holds it, set once every
	// request finished, also when the file could not be written (the
	// caller can still show it).
	SummaryJSON []byte
}

// MeasureToFiles measures c with [Measure] and keeps the evidence: records
// in c.Output as they finish, then the summary in c.SummaryPath(). Before
// anything is sent it reads the rows, checks the options, refuses output
// paths that would lose evidence (one file for both, or either already
// there), and asks the server for its model list (for an empty Model) or
// checks that it answers at all ([ErrUnreachable]), so that a command that
// could not keep its results fails at once and leaves nothing behind.
// Failed requests are not an error: they are in the evidence, and
// Summary.Counts.Failed counts them.
func MeasureToFiles(ctx context.Context, c Condition) (*Evidence, error) {
	opts := c.Options
	// Read once: the rows sent and the digest the summary records are of
	// the same bytes, even if the file is replaced meanwhile.
	data, err := os.ReadFile(c.Prompts)
	if err != nil {
		return nil, fmt.Errorf("prompts: %w", err)
	}
	rows, err := DecodeRows(bytes.NewReader(data), c.NumRequests)
	if err != nil {
		return nil, fmt.Errorf("prompts %s: %w", c.Prompts, err)
	}
	digest := sha256.Sum256(data)
	opts.WorkloadSHA256 = hex.EncodeToString(digest[:])
	if opts.Client == nil {
		client := NewHTTPClient(opts.MaxInFlight(len(rows)))
		defer client.CloseIdleConnections()
		opts.Client = client
	}
	// The options are checked before the server is asked for its model, so
	// a bad flag is named as such rather than hidden behind a failed lookup.
	probe := opts
	if probe.Model == "" {
		probe.Model = "the server's"
	}
	if err := probe.Validate(); err != nil {
		return nil, flagError(err)
	}
	output, summaryPath := c.Output, c.SummaryPath()
	if err := checkOutputs(output, summaryPath); err != nil {
		return nil, err
	}
	base, err := ServerBase(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("--url: %w", err)
	}
	if opts.Model == "" {
		// Pointing the client at a server is enough: it serves this model.
		ids, err := ServedModels(ctx, opts.Client, base, opts.APIKey)
		if err != nil {
			return nil, fmt.Errorf("--model not given and the server's model list is unavailable: %w", err)
		}
		opts.Model = ids[0]
	} else if err := CheckReachable(ctx, opts.Client, base, opts.APIKey); err != nil {
		// As the sweep does: a server that is not up gets an error, not an
		// output file of failed requests that Output then refuses to
		// replace.
		return nil, fmt.Errorf("%w: start the server and run the same command again", err)
	}
	for _, p := range []string{output, summaryPath} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
	}
	// Checked again: the files may have appeared while the server was
	// asked, and O_EXCL below is what finally keeps the records.
	if err := checkOutputs(output, summaryPath); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(output, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("refusing to overwrite %s: choose another --output", output)
		}
		return nil, err
	}
	if c.Progress != nil {
		start := time.Now()
		opts.Progress = func(done int) {
			fmt.Fprintf(c.Progress, "\r\033[K%d/%d requests, %.1f s", done, len(rows), time.Since(start).Seconds())
		}
	}
	sum, recs, _, runErr := Measure(ctx, opts, rows, f, nil)
	if c.Progress != nil {
		fmt.Fprint(c.Progress, "\r\033[K")
	}
	if err := f.Close(); runErr == nil {
		runErr = err
	}
	if runErr != nil {
		return nil, fmt.Errorf("%w (records written so far are in %s)", runErr, output)
	}
	ev := &Evidence{Summary: sum, Records: recs}
	if ev.SummaryJSON, err = files.MarshalIndent(sum); err != nil {
		return nil, err
	}
	// Never replaces a file: whatever appeared at summaryPath during the run
	// (the records themselves, under another spelling of their path) stays.
	if err := files.WriteNew(summaryPath, ev.SummaryJSON); err != nil {
		return ev, fmt.Errorf("summary (printed above, not written): %w; the records are in %s", err, output)
	}
	return ev, nil
}

// flagError turns a LoadOptions error, which names its JSON field
// ("request_rate: ..."), into one that names the flag ("--request-rate:
// ..."); a key inside extra_body keeps its own spelling.
func flagError(err error) error {
	field, rest, _ := strings.Cut(err.Error(), ":")
	flag, key, nested := strings.Cut(field, ".")
	flag = "--" + strings.ReplaceAll(flag, "_", "-")
	if nested {
		flag += "." + key
	}
	return errors.New(flag + ":" + rest)
}

// checkOutputs refuses output and summary paths that would lose evidence:
// one file for both, or either already there.
func checkOutputs(output, summaryPath string) error {
	if samePath(output, summaryPath) {
		return fmt.Errorf("--output and --summary both name %s: the summary would replace the per-request records; choose another --summary", output)
	}
	if _, err := os.Lstat(output); err == nil {
		return fmt.Errorf("refusing to overwrite %s: choose another --output", output)
	}
	if _, err := os.Lstat(summaryPath); err == nil {
		return fmt.Errorf("refusing to overwrite %s: choose another --output or --summary", summaryPath)
	}
	return nil
}

// samePath reports whether a and b name one file however spelled (another
// path to the same folder, a symbolic link); folders not yet made never do.
func samePath(a, b string) bool {
	if filepath.Base(a) != filepath.Base(b) {
		return false
	}
	da, err1 := os.Stat(filepath.Dir(a))
	db, err2 := os.Stat(filepath.Dir(b))
	return err1 == nil && err2 == nil && os.SameFile(da, db)
}
