//go:build unix

package sweep

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// uname is uname(2), whose fields Python's os.uname() and so
// platform.system(), release(), version() and machine() return.
func uname() (unameInfo, bool) {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return unameInfo{}, false
	}
	return unameInfo{
		sysname: unix.ByteSliceToString(u.Sysname[:]),
		release: unix.ByteSliceToString(u.Release[:]),
		version: unix.ByteSliceToString(u.Version[:]),
		machine: unix.ByteSliceToString(u.Machine[:]),
	}, true
}

// exitCode is Python's returncode: the exit status, or minus the signal
// that ended the process.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -int(ws.Signal())
	}
	return ps.ExitCode()
}
