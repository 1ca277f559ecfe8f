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

// lockFile is the file a running sweep holds in its folder, so that a
// second sweep on the same folder refuses instead of sending traffic at the
// same time (the two would mix their evidence and one session's manifest
// record would be lost).
const lockFile = "sweep.lock"

// lockOwner is what a lock file says of the sweep that holds it.
type lockOwner struct {
	pid     int
	host    string
	started string // RFC 3339, when the sweep took the lock
	// procStart is the owner process's start time as the kernel counts it
	// (Linux: clock ticks since boot, /proc/PID/stat field 22) and boot
	// the boot's id; with them a pid reused by another process, or one
	// from before a reboot, is told from the owner. Empty where unknown.
	procStart, boot string
}

// String is the lock file's content: one "key value" line per field.
func (o lockOwner) String() string {
	s := fmt.Sprintf("pid %d\nhost %s\nstarted %s\n", o.pid, o.host, o.started)
	if o.procStart != "" {
		s += "proc-start " + o.procStart + "\n"
	}
	if o.boot != "" {
		s += "boot " + o.boot + "\n"
	}
	return s
}

// parseLockOwner reads a lock file's contents; ok is false when it does
// not name a pid and a host (a lock written by hand, or cut short).
func parseLockOwner(b []byte) (o lockOwner, ok bool) {
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "pid":
			o.pid, _ = strconv.Atoi(v)
		case "host":
			o.host = v
		case "started":
			o.started = v
		case "proc-start":
			o.procStart = v
		case "boot":
			o.boot = v
		}
	}
	return o, o.pid > 0 && o.host != ""
}

// thisProcess is the owner record of the running process.
func thisProcess(now time.Time) lockOwner {
	host, _ := os.Hostname()
	return lockOwner{pid: os.Getpid(), host: host, started: now.UTC().Format(time.RFC3339Nano),
		procStart: processStart(os.Getpid()), boot: bootID()}
}

// staleReason says why the owner o of a lock can no longer be running,
// or "" when it may be: only an owner on this host can be checked (a
// folder on a shared file system may be another machine's sweep's).
func staleReason(o lockOwner) string {
	host, _ := os.Hostname()
	if o.host != host {
		return ""
	}
	if o.boot != "" && bootID() != "" && o.boot != bootID() {
		return "the machine has restarted since"
	}
	switch processAlive(o.pid) {
	case aliveNo:
		return fmt.Sprintf("no process %d is running", o.pid)
	case aliveUnknown:
		return ""
	}
	if o.procStart != "" {
		if now := processStart(o.pid); now != "" && now != o.procStart {
			return fmt.Sprintf("process %d is another program now (it started later)", o.pid)
		}
	}
	return ""
}

// lockRoot takes root's lock by creating [lockFile] exclusively, with the
// owner's pid, host and start times inside for whoever finds it. O_EXCL
// works on every platform Go builds for, unlike flock. A lock whose owner
// is known to be dead (a sweep that was killed) is taken over, and logf
// says so; any other lock refuses. It returns the function that releases
// the lock.
func lockRoot(root string, now time.Time, logf func(string, ...any)) (release func() error, err error) {
	path := filepath.Join(root, lockFile)
	content := thisProcess(now).String()
	for attempt := 0; ; attempt++ {
		err = createLock(path, content)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("locking %s: %w", root, err)
		}
		if attempt > 0 {
			return nil, lockHeld(path)
		}
		reason, err := breakStaleLock(path)
		if err != nil {
			return nil, err
		}
		logf("warning: %s: the sweep that held it is gone (%s); taking the folder over", path, reason)
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

// createLock creates the lock file at path with content, failing with
// fs.ErrExist when there is one. The content is written to a temporary
// file first and linked into place, so that a sweep killed at any instant
// leaves either no lock or a whole one, whose owner can be checked (a
// lock created empty and killed before its owner was written would
// refuse the folder for good).
func createLock(path, content string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+lockFile+".tmp-*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	defer os.Remove(name)
	werr := tmp.Chmod(0o644)
	if werr == nil {
		_, werr = tmp.WriteString(content)
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return werr
	}
	files.CrashPoint("lock written")
	if err := os.Link(name, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return err
		}
		// No hard links here: fall back to an exclusive create.
		f, cerr := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if cerr != nil {
			return cerr
		}
		_, werr := f.WriteString(content)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			os.Remove(path)
		}
		return werr
	}
	return nil
}

// breakStaleLock removes the lock at path if its owner is known to be
// dead, and says why; otherwise it refuses as [lockHeld]. Two sweeps may
// find the same stale lock at once: each moves it aside under a name of
// its own first, so only one of them removes it, and one that finds a
// different (live) lock there puts it back.
func breakStaleLock(path string) (reason string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", lockHeld(path)
	}
	o, ok := parseLockOwner(b)
	if !ok {
		return "", lockHeld(path)
	}
	if reason = staleReason(o); reason == "" {
		return "", lockHeld(path)
	}
	aside := fmt.Sprintf("%s.stale-%d-%d", path, os.Getpid(), time.Now().UnixNano())
	if err := os.Rename(path, aside); err != nil {
		return "", lockHeld(path)
	}
	if got, err := os.ReadFile(aside); err != nil || string(got) != string(b) {
		_ = os.Link(aside, path) // someone else's fresh lock: put it back, unless replaced
		os.Remove(aside)
		return "", lockHeld(path)
	}
	return reason, os.Remove(aside)
}

// lockHeld is the refusal for a folder whose lock file at path exists.
func lockHeld(path string) error {
	held := "its contents could not be read"
	if b, err := os.ReadFile(path); err == nil {
		held = strings.Join(strings.Fields(string(b)), " ")
	}
	return fmt.Errorf("%w: %s exists (%s): another sweep is using this folder; if no sweep is running (one that was killed on another machine, or whose owner cannot be checked, leaves the file behind), delete %s and run again",
		ErrRefused, path, held, path)
}

// alive is what processAlive can tell of a pid.
type alive int

const (
	aliveUnknown alive = iota
	aliveYes
	aliveNo
)
