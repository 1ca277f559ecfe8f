package sweep

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tinyserve/tinyserve/sweep/internal/files"
)

// A run is two files, its records (JSONL) and its summary, and a resume
// trusts a run only when both are there. No file system renames two files
// at once, so the summary is first written in full beside its final name
// (pendingSuffix), then the records are published, then the summary: at
// every instant between, a rerun finds what it needs to finish the
// publication (recoverRuns), and a kill can never leave records without a
// summary that a rerun must refuse.

// pendingSuffix marks a run's summary written before its records were
// published.
const pendingSuffix = ".pending"

// publishRun publishes a run whose records are complete in partial: its
// summary (sb) goes to summary+pendingSuffix, the records to raw, then the
// summary to summary. Neither raw nor summary is ever replaced.
func publishRun(partial, raw, summary string, sb []byte) error {
	if err := files.WriteAtomic(summary+pendingSuffix, sb); err != nil {
		return err
	}
	files.CrashPoint("summary pending")
	if err := files.PublishNew(partial, raw); err != nil {
		return err
	}
	files.CrashPoint("records published")
	return files.PublishNew(summary+pendingSuffix, summary)
}

// recoverRuns finishes what a sweep killed in root left half done, under
// the lock, before the runs are checked, and returns a line for each thing
// it did:
//   - temporary files of atomic writes (".NAME.tmp-*") are removed: they
//     never became anything;
//   - a pending summary whose records were published is published too (the
//     run completes as the killed sweep would have completed it); one whose
//     records were not is removed (the run is measured again, and its
//     partial records stay as evidence);
//   - a partial file that is a hard link of its run's published records (a
//     kill between the link and the removal) is removed.
func recoverRuns(root string) ([]string, error) {
	var notes []string
	dirs := []string{root}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join(root, e.Name()))
		}
	}
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return notes, err
		}
		for _, e := range entries {
			name, path := e.Name(), filepath.Join(dir, e.Name())
			if !e.Type().IsRegular() {
				continue
			}
			var note string
			switch {
			case strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp-"):
				if err := os.Remove(path); err != nil {
					return notes, err
				}
				note = "removed " + path + ", a temporary file of a write that never finished"
			case strings.HasSuffix(name, ".summary.json"+pendingSuffix):
				if note, err = recoverPending(path); err != nil {
					return notes, err
				}
			case strings.Contains(name, ".jsonl.partial-"):
				raw := path[:strings.Index(path, ".partial-")]
				if sameFile(path, raw) {
					if err := os.Remove(path); err != nil {
						return notes, err
					}
					note = "removed " + path + ", a second name of the published " + filepath.Base(raw)
				}
			}
			if note != "" {
				notes = append(notes, note)
			}
		}
	}
	return notes, nil
}

// recoverPending finishes or takes back the pending summary at path.
func recoverPending(path string) (string, error) {
	summary := strings.TrimSuffix(path, pendingSuffix)
	raw := strings.TrimSuffix(summary, ".summary.json") + ".jsonl"
	rawOK, err := files.Exists(raw)
	if err != nil {
		return "", err
	}
	sumOK, err := files.Exists(summary)
	if err != nil {
		return "", err
	}
	switch {
	case sumOK && sameFile(path, summary):
		return "removed " + path + ", a second name of the published " + filepath.Base(summary), os.Remove(path)
	case sumOK:
		// Not ours to decide: keep both, under a name that does not
		// look pending.
		aside := path + ".stale-" + strconv.FormatInt(time.Now().UnixNano(), 10)
		return "moved " + path + " aside to " + aside + " (a published summary differs from it)", os.Rename(path, aside)
	case rawOK:
		if err := files.PublishNew(path, summary); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", err
		}
		return "published " + summary + ", the summary of " + filepath.Base(raw) + " that a killed sweep had not published yet", nil
	default:
		return "removed " + path + ": its run's records were never published, so the run is measured again", os.Remove(path)
	}
}

// sameFile reports whether a and b are one file (two hard links).
func sameFile(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}

// orphanAdvice is what to do with a run that has one of its two files:
// left by a sweep killed while publishing it (before publishRun made that
// safe) or by a hand. present is the file that is there.
func orphanAdvice(present string) string {
	return fmt.Sprintf("move it aside (mv %s %s.orphan) and run again to measure that run afresh, or measure elsewhere with a new name or --output-root", present, present)
}
