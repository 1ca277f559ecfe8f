package sweep

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// LockFile is the file a running sweep holds in its folder, so that a
// second sweep on the same folder refuses instead of sending traffic at the
// same time (the two would mix their evidence and one session's manifest
// record would be lost).
const LockFile = "sweep.lock"

// lockRoot takes root's lock by creating [LockFile] exclusively, with the
// process id, host and start time inside for whoever finds it. O_EXCL works
// on every platform Go builds for, unlike flock. It returns the function
// that releases the lock. A lock left by a sweep that was killed stays;
// the refusal says to delete it when no sweep is running.
func lockRoot(root string, now time.Time) (release func() error, err error) {
	path := filepath.Join(root, LockFile)
	host, _ := os.Hostname()
	content := fmt.Sprintf("pid %d\nhost %s\nstarted %s\n", os.Getpid(), host, now.UTC().Format(time.RFC3339Nano))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return nil, lockHeld(path)
	}
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", root, err)
	}
	_, werr := f.WriteString(content)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(path)
		return nil, fmt.Errorf("locking %s: %w", root, werr)
	}
	return func() error {
		// Remove only our own lock: if someone deleted it by hand and
		// another sweep took the folder since, the file is theirs.
		if b, err := os.ReadFile(path); err != nil || string(b) != content {
			return nil
		}
		return os.Remove(path)
	}, nil
}

// lockHeld is the refusal for a folder whose lock file at path exists.
func lockHeld(path string) error {
	held := "its contents could not be read"
	if b, err := os.ReadFile(path); err == nil {
		held = strings.Join(strings.Fields(string(b)), " ")
	}
	return fmt.Errorf("%w: %s exists (%s): another sweep is using this folder; if no sweep is running (one that was killed leaves the file behind), delete %s and run again",
		ErrRefused, path, held, path)
}
