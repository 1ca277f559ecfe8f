//go:build !unix

package sweep

import "os"

// uname is not there: system.release, kernel and machine stay empty.
func uname() (unameInfo, bool) { return unameInfo{}, false }

// exitCode is Python's returncode.
func exitCode(ps *os.ProcessState) int { return ps.ExitCode() }
