package sweep

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// runCmd runs a short command with a bounded time and the environment's
// PATH only, so that no other environment data can leak into the manifest.
func runCmd(ctx context.Context, dir string, name string, args ...string) (string, bool) {
	out, ok := runCmdRaw(ctx, dir, name, args...)
	if !ok {
		return "", false
	}
	return strings.TrimSpace(string(out)), true
}

// runCmdRaw is [runCmd] returning the output untrimmed, for output whose
// every byte counts.
func runCmdRaw(ctx context.Context, dir string, name string, args ...string) ([]byte, bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.Output()
	return out, err == nil
}

// collectGit describes the git checkout at dir. A modified tree also gets
// a fingerprint of its modifications, so that a sweep resumed after more
// edits to an already modified tree is seen to run on other code. The
// folder skip (the sweep's output root, when it lies in the checkout; ""
// for none) is left out: what the sweep writes there is no change to the
// measured code, and counting it would mark every resume of a sweep kept
// in the tree as run on other software.
func collectGit(ctx context.Context, dir, skip string) GitInfo {
	rev, ok1 := runCmd(ctx, dir, "git", "rev-parse", "HEAD")
	// The whole checkout, wherever in it dir is.
	spec := []string{"--", ":/"}
	if top, ok := runCmd(ctx, dir, "git", "rev-parse", "--show-toplevel"); ok {
		if rel := within(top, skip); rel != "" {
			spec = append(spec, ":(top,literal,exclude)"+rel)
		}
	}
	status, ok2 := runCmd(ctx, dir, "git", append([]string{"status", "--porcelain", "--untracked-files=normal"}, spec...)...)
	g := GitInfo{Available: ok1 && ok2, Revision: rev}
	if ok2 {
		d := status != ""
		g.Dirty = &d
		if d {
			g.DiffSHA256 = diffFingerprint(ctx, dir, spec)
		}
	}
	return g
}

// within returns path relative to the folder top, with forward slashes,
// or "" when path is empty, top itself or outside it.
func within(top, path string) string {
	if path == "" {
		return ""
	}
	real := func(p string) string {
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		return p
	}
	rel, err := filepath.Rel(real(top), real(path))
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return ""
	}
	return filepath.ToSlash(rel)
}

// untrackedHashLimit bounds the untracked files read into the fingerprint;
// a larger one counts by its size alone.
const untrackedHashLimit = 1 << 20

// diffFingerprint hashes the tree's changes against HEAD: the diff of the
// tracked files, and each untracked (not ignored) file's name and content,
// over the whole checkout (git ls-files alone would list only dir's
// subtree), limited to the pathspec spec ("--" and its paths). It is
// empty when git cannot say.
func diffFingerprint(ctx context.Context, dir string, spec []string) string {
	top, ok := runCmd(ctx, dir, "git", "rev-parse", "--show-toplevel")
	if !ok {
		return ""
	}
	// No external diff or textconv driver: the repository's config could
	// name one whose output is not the change itself.
	diff, ok := runCmdRaw(ctx, top, "git", append([]string{"diff", "HEAD", "--binary", "--no-ext-diff", "--no-textconv"}, spec...)...)
	if !ok {
		return ""
	}
	// NUL-separated, so that names git would quote or that end in spaces
	// come back as they are on disk.
	others, ok := runCmdRaw(ctx, top, "git", append([]string{"ls-files", "-z", "--others", "--exclude-standard"}, spec...)...)
	if !ok {
		return ""
	}
	h := sha256.New()
	fmt.Fprintf(h, "diff %d\n", len(diff))
	h.Write(diff)
	for name := range strings.SplitSeq(string(others), "\x00") {
		if name == "" {
			continue
		}
		fmt.Fprintf(h, "untracked %q\n", name)
		p := filepath.Join(top, filepath.FromSlash(name))
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() || fi.Size() > untrackedHashLimit {
			if err == nil {
				fmt.Fprintf(h, "size %d\n", fi.Size())
			}
			continue
		}
		if b, err := os.ReadFile(p); err == nil {
			fmt.Fprintf(h, "content %d\n", len(b))
			h.Write(b)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// collectEnvironment describes this machine: Go version, OS, CPU, GPUs.
// The keys serving-inference's manifest has too mean what they mean
// there: system.os, release, kernel and machine are Python's
// platform.system(), release(), version() and machine() (uname's
// sysname, release, version and machine: "Linux", "6.8.0-45-generic",
// "#45-Ubuntu SMP PREEMPT_DYNAMIC …", "x86_64"), and accelerator.reason
// says why nvidia-smi gave nothing as its run_command does.
func collectEnvironment(ctx context.Context) Environment {
	e := Environment{
		Go:     GoInfo{Version: runtime.Version()},
		System: SystemInfo{OS: osName(runtime.GOOS), Arch: runtime.GOARCH, NumCPU: runtime.NumCPU()},
	}
	if u, ok := uname(); ok {
		e.System.OS, e.System.Release, e.System.Kernel, e.System.Machine = u.sysname, u.release, u.version, u.machine
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		e.System.CPUModel = cpuModel(f)
		f.Close()
	}
	e.Accelerator = Accelerator{GPUs: []GPU{}}
	out, why := runCmdWhy(ctx, "", "nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader,nounits")
	if why != "" {
		e.Accelerator.Reason = why
		return e
	}
	e.Accelerator.NvidiaSMIAvailable = true
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, ",")
		if len(f) < 3 {
			continue
		}
		g := GPU{Name: strings.TrimSpace(f[0])}
		if v, err := strconv.ParseFloat(strings.TrimSpace(f[1]), 64); err == nil {
			n := int(v)
			g.VRAMMiB = &n
		}
		if e.Accelerator.DriverVersion == "" {
			e.Accelerator.DriverVersion = strings.TrimSpace(f[2])
		}
		e.Accelerator.GPUs = append(e.Accelerator.GPUs, g)
	}
	return e
}

// unameInfo is uname(2)'s answer, which Python's platform module reports.
type unameInfo struct{ sysname, release, version, machine string }

// osName is what Python's platform.system() says on a system without
// uname: "Windows" for windows, the GOOS capitalised otherwise.
func osName(goos string) string {
	switch goos {
	case "windows":
		return "Windows"
	case "wasip1":
		return "WASI"
	case "":
		return ""
	}
	return strings.ToUpper(goos[:1]) + goos[1:]
}

// runCmdWhy is [runCmd] that says why it got no output the way
// serving-inference's run_command does ("reason"): the name of the Python
// exception subprocess.run would raise (FileNotFoundError,
// PermissionError, TimeoutExpired, OSError), or exit_code_N for a
// command that failed; "" when it succeeded.
func runCmdWhy(ctx context.Context, dir string, name string, args ...string) (string, string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.Output()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return strings.TrimSpace(string(out)), ""
	case ctx.Err() != nil:
		return "", "TimeoutExpired"
	case errors.As(err, &exit):
		return "", fmt.Sprintf("exit_code_%d", exitCode(exit.ProcessState))
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return "", "FileNotFoundError"
	case errors.Is(err, fs.ErrPermission):
		return "", "PermissionError"
	}
	return "", "OSError"
}

func cpuModel(r io.Reader) string {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
