//go:build unix

package sweep

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deadPid returns the pid of a process that has exited (and been reaped).
func deadPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	return cmd.Process.Pid
}

// TestLockStaleness: a lock is taken over only when its owner is known to
// be gone (this host, and no such process, a pid now held by a process
// that started later, or another boot); a live owner, another host's, or
// a lock that names no owner refuses.
func TestLockStaleness(t *testing.T) {
	host, _ := os.Hostname()
	self := thisProcess(time.Now())
	dead := self
	dead.pid = deadPid(t)
	reused := self
	reused.procStart = "1" // this pid, but its process started at tick 1
	rebooted := self
	rebooted.boot = "another-boot"
	otherHost := dead
	otherHost.host = host + "-elsewhere"
	cases := []struct {
		name    string
		content string
		stale   string // what the warning says; "" when refused
	}{
		{"dead pid on this host", dead.String(), "no process " + strconv.Itoa(dead.pid) + " is running"},
		{"pid reused by a later process", reused.String(), "is another program now"},
		{"another boot", rebooted.String(), "the machine has restarted since"},
		{"live owner", self.String(), ""},
		{"another host", otherHost.String(), ""},
		{"no owner named", "pid 1\n", ""},
		{"empty", "", ""},
	}
	if self.procStart == "" {
		cases = cases[:0] // no /proc: only the dead pid can be told
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			path := filepath.Join(root, lockFile)
			require.NoError(t, os.WriteFile(path, []byte(c.content), 0o644))
			var logged []string
			release, err := lockRoot(root, time.Now(), func(f string, a ...any) { logged = append(logged, f) })
			if c.stale == "" {
				require.ErrorIs(t, err, ErrRefused)
				assert.Contains(t, err.Error(), "another sweep is using this folder")
				assert.Equal(t, c.content, string(readFile(t, path)), "a lock that may be live is kept")
				return
			}
			require.NoError(t, err)
			require.Len(t, logged, 1)
			owner, ok := parseLockOwner(readFile(t, path))
			require.True(t, ok)
			assert.Equal(t, os.Getpid(), owner.pid, "the lock is this sweep's now")
			require.NoError(t, release())
			assert.NoFileExists(t, path)
			matches, _ := filepath.Glob(path + ".stale-*")
			assert.Empty(t, matches, "the stale lock is gone, not kept aside")
		})
	}
	t.Run("reason", func(t *testing.T) {
		assert.Contains(t, staleReason(dead), "no process")
		assert.Empty(t, staleReason(self))
	})
}
