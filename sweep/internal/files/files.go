// Package files writes a sweep folder's files the way every layer above it
// must: atomically (a crash leaves the old file or the new one), never
// replacing evidence, in serving-inference's JSON layout; and it names the
// files of the folder. It is internal to sweep: the load generator, the
// analysis, the reports and the runner share it, and nothing outside sweep
// needs it.
package files

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The files of a sweep folder besides the runs' (those are named by
// analysis.RunSpec).
const (
	SummaryFile  = "summary.json"
	ReportFile   = "report.md"
	CSVFile      = "summary.csv"
	PlotPNGFile  = "plot.png"
	PlotSVGFile  = "plot.svg"
	ConfigFile   = "config.json"
	ManifestFile = "manifest.json"
	ModelsFile   = "models.json"
)

// WriteAtomic writes data to path through a temporary file in the same
// folder and a rename, so a crash leaves either the old file or the new one,
// never half of one.
func WriteAtomic(path string, data []byte) error {
	return writeVia(path, data, func(tmp string) error { return os.Rename(tmp, path) })
}

// WriteNew writes data to a temporary file and publishes it at path with
// [PublishNew]: it never replaces a file already there and fails with an
// error wrapping fs.ErrExist instead. It is how evidence is written.
func WriteNew(path string, data []byte) error {
	return writeVia(path, data, func(tmp string) error { return PublishNew(tmp, path) })
}

// writeVia writes data, synced, to a temporary file beside path and hands
// its name to publish; the temporary file is removed if anything fails.
func writeVia(path string, data []byte, publish func(tmp string) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	// CreateTemp makes the file private (0600); reports and summaries are
	// meant to be read and shared like the records beside them.
	werr := tmp.Chmod(0o644)
	if werr == nil {
		_, werr = tmp.Write(data)
	}
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	CrashPoint("temporary file written")
	if werr == nil {
		werr = publish(name)
	}
	if werr != nil {
		os.Remove(name)
	}
	return werr
}

// PublishNew moves the finished temporary file tmp to path, failing with
// fs.ErrExist rather than replacing a file already there: evidence is never
// overwritten. A hard link gives that guarantee atomically; where links are
// not supported it falls back to a check and a rename.
func PublishNew(tmp, path string) error {
	if err := os.Link(tmp, path); err == nil {
		CrashPoint("linked")
		return os.Remove(tmp)
	} else if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("refusing to overwrite %s: %w", path, fs.ErrExist)
	}
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("refusing to overwrite %s: %w", path, fs.ErrExist)
	}
	return os.Rename(tmp, path)
}

// CrashHook, when set (by the kill tests only), is called at every step
// between two states of the files on disk, where a SIGKILL would leave the
// earlier state and the later one half done.
var CrashHook func(at string)

// CrashPoint marks such a step.
func CrashPoint(at string) {
	if CrashHook != nil {
		CrashHook(at)
	}
}

// MarshalIndent is JSON with two-space indentation and a final newline, the
// layout serving-inference writes; HTML characters are not escaped so that
// prompts and errors stay readable.
func MarshalIndent(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Exists reports whether something is at path (a broken link counts);
// errors other than its absence are returned.
func Exists(path string) (bool, error) {
	_, err := os.Lstat(path)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, err
}
