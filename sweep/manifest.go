package sweep

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// ManifestSchemaVersion is the manifest's schema version, serving-inference's.
const ManifestSchemaVersion = "1.0"

// Redacted replaces every secret in a manifest.
const Redacted = "[REDACTED]"

// sensitiveKey matches key names that hold secrets, as serving-inference's
// SENSITIVE_KEY does: api_key, authorization, cookie, credential, password,
// secret, token as whole words of the key.
var sensitiveKey = regexp.MustCompile(`(?i)(^|[_-])(api[_-]?key|authorization|cookie|credential|passwd|password|secret|token)([_-]|$)`)

// Sanitize returns a copy of v (a JSON value: maps, slices, strings,
// numbers) with secrets replaced by [Redacted]: values under sensitive keys,
// bearer strings, URL credentials and sensitive query parameters, and the
// value after a sensitive command-line flag (--api-key X, --token=X).
func Sanitize(v any) any { return sanitize(v, "") }

func sanitize(v any, key string) any {
	if key != "" && sensitiveKey.MatchString(key) {
		return Redacted
	}
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, item := range t {
			out[k] = sanitize(item, k)
		}
		return out
	case []any:
		out := make([]any, 0, len(t))
		redactNext := false
		for _, item := range t {
			if redactNext {
				out = append(out, Redacted)
				redactNext = false
				continue
			}
			if s, ok := item.(string); ok && strings.HasPrefix(s, "-") {
				flag, _, hasValue := strings.Cut(s, "=")
				if sensitiveKey.MatchString(strings.TrimLeft(flag, "-")) {
					if hasValue {
						out = append(out, flag+"="+Redacted)
					} else {
						out = append(out, flag)
						redactNext = true
					}
					continue
				}
			}
			out = append(out, sanitize(item, ""))
		}
		return out
	case []string:
		a := make([]any, len(t))
		for i, s := range t {
			a[i] = s
		}
		return sanitize(a, "")
	case string:
		if strings.HasPrefix(strings.ToLower(strings.TrimSpace(t)), "bearer ") {
			return Redacted
		}
		return sanitizeURL(t)
	default:
		return v
	}
}

func sanitizeURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return s
	}
	changed := false
	if u.User != nil {
		u.User = nil
		changed = true
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			if sensitiveKey.MatchString(k) {
				q[k] = []string{Redacted}
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	if !changed {
		return s
	}
	return u.String()
}

// Manifest is manifest.json: what was measured, with what, where and when,
// so that a result can be audited and reproduced. Its layout follows
// serving-inference's experiment manifest (scripts/experiment_manifest.py)
// with a Go toolchain in place of the Python one.
type Manifest struct {
	SchemaVersion string             `json:"schema_version"`
	Experiment    ManifestExperiment `json:"experiment"`
	Config        ManifestConfig     `json:"config"`
	Workload      ManifestWorkload   `json:"workload"`
	Source        ManifestSource     `json:"source"`
	Environment   Environment        `json:"environment"`
	Serving       ManifestServing    `json:"serving"`
}

// ManifestExperiment is the sweep's identity and state.
type ManifestExperiment struct {
	Name           string  `json:"name"`
	StartedAtUTC   string  `json:"started_at_utc"`
	CompletedAtUTC *string `json:"completed_at_utc"`
	// Status is running, completed or failed.
	Status  string `json:"status"`
	Warmups int    `json:"warmups"`
	Repeats int    `json:"repeats"`
	// Sessions counts the invocations that worked on this folder; more than
	// one means the sweep was resumed.
	Sessions int `json:"sessions"`
}

// ManifestConfig holds the config as written and as resolved, sanitized.
type ManifestConfig struct {
	Original any `json:"original"`
	Resolved any `json:"resolved"`
}

// ManifestWorkload identifies the prompt file by content.
type ManifestWorkload struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// ManifestSource is the measuring tool's source revision.
type ManifestSource struct {
	Git GitInfo `json:"git"`
}

// GitInfo is the repository revision the tool was built from, when known.
type GitInfo struct {
	Available bool   `json:"available"`
	Revision  string `json:"revision,omitempty"`
	Dirty     *bool  `json:"dirty"`
}

// ManifestServing describes the measured server.
type ManifestServing struct {
	Model  any `json:"model"`
	Server any `json:"server"`
	// Target is the embedded engine's settings, when there is one.
	Target any `json:"target,omitempty"`
}

// Environment describes the machine the client ran on.
type Environment struct {
	Go          GoInfo      `json:"go"`
	System      SystemInfo  `json:"system"`
	Accelerator Accelerator `json:"accelerator"`
}

// GoInfo is the toolchain that built the client.
type GoInfo struct {
	Version string `json:"version"`
}

// SystemInfo is the operating system and CPU.
type SystemInfo struct {
	OS       string `json:"os"`
	Arch     string `json:"arch"`
	Kernel   string `json:"kernel,omitempty"`
	CPUModel string `json:"cpu_model,omitempty"`
	NumCPU   int    `json:"num_cpu"`
}

// GPU is one accelerator as nvidia-smi reports it.
type GPU struct {
	Name    string `json:"name"`
	VRAMMiB *int   `json:"vram_mib"`
}

// Accelerator lists the GPUs nvidia-smi sees, if it is installed.
type Accelerator struct {
	NvidiaSMIAvailable bool   `json:"nvidia_smi_available"`
	GPUs               []GPU  `json:"gpus"`
	DriverVersion      string `json:"driver_version,omitempty"`
	Reason             string `json:"reason,omitempty"`
}

// runCmd runs a short command with a bounded time and the environment's
// PATH only, so that no other environment data can leak into the manifest.
func runCmd(ctx context.Context, dir string, name string, args ...string) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.Output()
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(out)), true
}

// CollectGit describes the git checkout at dir.
func CollectGit(ctx context.Context, dir string) GitInfo {
	rev, ok1 := runCmd(ctx, dir, "git", "rev-parse", "HEAD")
	status, ok2 := runCmd(ctx, dir, "git", "status", "--porcelain", "--untracked-files=normal")
	g := GitInfo{Available: ok1 && ok2, Revision: rev}
	if ok2 {
		d := status != ""
		g.Dirty = &d
	}
	return g
}

// CollectEnvironment describes this machine: Go version, OS, CPU, GPUs.
func CollectEnvironment(ctx context.Context) Environment {
	e := Environment{
		Go:     GoInfo{Version: runtime.Version()},
		System: SystemInfo{OS: runtime.GOOS, Arch: runtime.GOARCH, NumCPU: runtime.NumCPU()},
	}
	if k, ok := runCmd(ctx, "", "uname", "-r"); ok {
		e.System.Kernel = k
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		e.System.CPUModel = cpuModel(f)
		f.Close()
	}
	e.Accelerator = Accelerator{GPUs: []GPU{}}
	out, ok := runCmd(ctx, "", "nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader,nounits")
	if !ok {
		e.Accelerator.Reason = "nvidia-smi not available"
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

// FileSHA256 returns the hex SHA-256 of the file at path.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
