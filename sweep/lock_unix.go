//go:build unix

package sweep

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// processAlive says whether a process with pid exists: signal 0 checks
// without sending anything, and EPERM means it exists under another user.
func processAlive(pid int) alive {
	err := syscall.Kill(pid, 0)
	switch {
	case err == nil, errors.Is(err, syscall.EPERM):
		return aliveYes
	case errors.Is(err, syscall.ESRCH):
		return aliveNo
	}
	return aliveUnknown
}

// processStart is the start time of process pid in clock ticks since boot
// (field 22 of /proc/PID/stat), or "" where there is no /proc.
func processStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// count fields after its closing one.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19] // field 22 is the 20th after the name
}

// bootID is the kernel's id of this boot, or "" where there is none.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
