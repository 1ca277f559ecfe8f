package sweep

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/tinyserve/tinyserve/sweep/analysis"
	"github.com/tinyserve/tinyserve/sweep/internal/files"
	"github.com/tinyserve/tinyserve/sweep/loadgen"
)

// manifestSchemaVersion is the manifest's schema version, serving-inference's.
const manifestSchemaVersion = "1.0"

// Manifest is manifest.json: what was measured, with what, where and when,
// so that a result can be audited and reproduced. Its layout follows
// serving-inference's experiment manifest (scripts/experiment_manifest.py)
// with a Go toolchain in place of the Python one; a key both tools write
// means the same in both. A folder that serving-inference began keeps
// that tool's manifest, valid under its schema: tinyserve's bookkeeping
// of the sessions (experiment.sessions, resumes) is then kept in
// sessionsFile beside it (see writeManifest).
type Manifest struct {
	SchemaVersion string             `json:"schema_version"`
	Experiment    ManifestExperiment `json:"experiment"`
	Config        ManifestConfig     `json:"config"`
	Workload      analysis.Workload  `json:"workload"`
	Source        ManifestSource     `json:"source"`
	Environment   Environment        `json:"environment"`
	Serving       ManifestServing    `json:"serving"`
	// Resumes are the invocations after the first (Source and Environment
	// describe the first): a resumed sweep's runs may come from different
	// code or machines, and this says which. Kept in sessionsFile when
	// serving-inference began the folder.
	Resumes []ManifestResume `json:"resumes,omitempty"`

	// raw is manifest.json as a resumed sweep read it, numbers exact, so
	// that writing it again keeps what this struct does not hold: a
	// manifest written by serving-inference records the vLLM version and
	// fingerprint it measured (serving.vllm), its Python packages and
	// CUDA version, which a resume must not drop.
	raw map[string]any
}

// ManifestResume is one invocation that resumed the sweep. Each run's
// summary names the session that measured it (config.session).
type ManifestResume struct {
	Session      int            `json:"session"`
	StartedAtUTC string         `json:"started_at_utc"`
	Source       ManifestSource `json:"source"`
	Environment  Environment    `json:"environment"`
	// Checkpoint is what this session's embedded target loaded (the same
	// files as the first session's: a resume with others refuses).
	Checkpoint *analysis.Checkpoint `json:"checkpoint,omitempty"`
}

// provenance is what session n ran on: the first invocation's tool,
// source and environment, or a resume's (tinyserve's); ok is false for a
// session the manifest does not know.
func (m *Manifest) provenance(n int) (s setup, ok bool) {
	if n == 1 {
		tool := toolTinyserve
		if m.byServingInference() {
			tool = toolServingInference
		}
		return setup{tool: tool, source: m.Source, env: m.Environment}, true
	}
	for _, r := range m.Resumes {
		if r.Session == n {
			return setup{tool: toolTinyserve, source: r.Source, env: r.Environment}, true
		}
	}
	return setup{}, false
}

// sessionChanges lists, one phrase each, how the sessions that measured
// the given runs differ in benchmark client, source revision or
// environment from the earliest of them; nil when they do not (or when
// one session measured them all). Sessions the manifest does not know are
// left out. Only what both sessions record, with one meaning, is
// compared (see setup.changes).
func (m *Manifest) sessionChanges(sessions []int) []string {
	var known []int
	for _, n := range sessions {
		if _, ok := m.provenance(n); ok && !slices.Contains(known, n) {
			known = append(known, n)
		}
	}
	slices.Sort(known)
	if len(known) < 2 {
		return nil
	}
	first := known[0]
	a, _ := m.provenance(first)
	var out []string
	for _, n := range known[1:] {
		b, _ := m.provenance(n)
		a.changes(b, func(what, x, y string) {
			if x != y {
				out = append(out, fmt.Sprintf("%s %s in session %d, %s in session %d", what, orUnknown(x), first, orUnknown(y), n))
			}
		})
	}
	return out
}

func orUnknown(s string) string {
	if strings.TrimSpace(s) == "" {
		return "unknown"
	}
	return s
}

// describe is the revision and whether the tree was modified.
func (g GitInfo) describe() string {
	if !g.Available {
		return ""
	}
	if g.Dirty != nil && *g.Dirty {
		if g.DiffSHA256 != "" {
			return g.Revision + " (modified: " + g.DiffSHA256[:12] + ")"
		}
		return g.Revision + " (modified)"
	}
	return g.Revision
}

// describe names the GPUs and the driver; "none" when nvidia-smi saw none
// (or is not there).
func (a Accelerator) describe() string {
	if len(a.GPUs) == 0 {
		return "none"
	}
	var names []string
	for _, g := range a.GPUs {
		names = append(names, g.Name)
	}
	return strings.Join(names, ", ") + " " + a.DriverVersion
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
	// one means the sweep was resumed. Kept in sessionsFile when
	// serving-inference began the folder.
	Sessions int `json:"sessions"`
}

// ManifestConfig holds the config as written and as resolved, sanitized.
type ManifestConfig struct {
	Original any `json:"original"`
	Resolved any `json:"resolved"`
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
	// DiffSHA256 fingerprints a modified tree's changes against Revision:
	// the diff of its tracked files and its untracked files' names and
	// contents (those over 1 MiB by size).
	DiffSHA256 string `json:"diff_sha256,omitempty"`
}

// ManifestServing describes the measured server.
type ManifestServing struct {
	Model  any `json:"model"`
	Server any `json:"server"`
	// Target is the embedded engine's settings, when there is one.
	Target any `json:"target,omitempty"`
	// Checkpoint is the files the embedded engine loaded, by content;
	// absent for a remote server or a model made in memory.
	Checkpoint *analysis.Checkpoint `json:"checkpoint,omitempty"`
}

// Environment describes the machine the client ran on.
type Environment struct {
	// Python is serving-inference's: the Python that ran its client. The
	// tool's schema requires it and tinyserve never writes it, so a
	// manifest that has it is one serving-inference wrote.
	Python      *PythonInfo `json:"python,omitempty"`
	Go          GoInfo      `json:"go"`
	System      SystemInfo  `json:"system"`
	Accelerator Accelerator `json:"accelerator"`
}

// GoInfo is the toolchain that built the client.
type GoInfo struct {
	Version string `json:"version"`
}

// SystemInfo is the operating system and CPU. OS, Release, Kernel and
// Machine are serving-inference's keys and mean what they mean there:
// Python's platform.system(), release(), version() and machine(), that is
// uname's sysname, release, version and machine. (tinyserve before
// issue 27 wrote runtime.GOOS as os and the release as kernel, and no
// release or machine; sessionChanges reads such a record as meant.)
type SystemInfo struct {
	// OS is the system's name: "Linux", "Darwin", "Windows".
	OS string `json:"os"`
	// Release is the kernel's release: "6.8.0-45-generic" (uname -r).
	Release string `json:"release,omitempty"`
	// Kernel is the kernel's version, its build string: "#45-Ubuntu SMP
	// PREEMPT_DYNAMIC Fri Aug 30 12:02:04 UTC 2024" (uname -v).
	Kernel string `json:"kernel,omitempty"`
	// Machine is the hardware: "x86_64", "aarch64", "arm64" (uname -m).
	Machine string `json:"machine,omitempty"`
	// Arch is tinyserve's: the architecture the Go client was built for
	// (runtime.GOARCH: "amd64", "arm64").
	Arch     string `json:"arch"`
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
	// Reason says why nvidia-smi gave nothing, as serving-inference says
	// it: FileNotFoundError (not installed), exit_code_N, TimeoutExpired.
	Reason string `json:"reason,omitempty"`
}

// startManifest writes the manifest for this invocation: a resumed sweep's
// is marked running again with one more session; a new one records the
// config, workload, source, environment and serving details.
func startManifest(ctx context.Context, root, wd string, orig, rc *Config, sha string, ck *analysis.Checkpoint, opts SweepOptions, now func() time.Time) (*Manifest, error) {
	path := filepath.Join(root, files.ManifestFile)
	var m Manifest
	env := opts.Environment
	if env == nil {
		e := collectEnvironment(ctx)
		env = &e
	}
	git := opts.Git
	if git == nil {
		g := collectGit(ctx, wd, root)
		git = &g
	}
	if b, err := os.ReadFile(path); err == nil && json.Unmarshal(b, &m) == nil && m.SchemaVersion == manifestSchemaVersion {
		// checkWorkload has made sure the prompt file is the one recorded.
		_ = decodeJSONExact(b, &m.raw)
		if m.byServingInference() {
			if err := m.readSessions(root); err != nil {
				return nil, err
			}
			dropTinyserveKeys(m.raw)
		}
		m.Experiment.Status, m.Experiment.CompletedAtUTC = "running", nil
		if m.Experiment.Sessions == 0 {
			// serving-inference counts no sessions: its runs (whose
			// summaries name none, so session 1) were at least one
			// invocation, and this one must not share its number, or a
			// report would not see that the rows mix two set-ups.
			m.Experiment.Sessions = 1
		}
		m.Experiment.Sessions++
		m.Resumes = append(m.Resumes, ManifestResume{
			Session:      m.Experiment.Sessions,
			StartedAtUTC: now().UTC().Format(time.RFC3339Nano),
			Source:       ManifestSource{Git: *git},
			Environment:  *env,
			Checkpoint:   ck,
		})
		return &m, writeManifest(root, &m)
	}
	model := map[string]any{"name": rc.Model}
	for k, v := range rc.ModelMetadata {
		model[k] = v
	}
	var server any
	if b, err := json.Marshal(rc.Server); err == nil {
		_ = json.Unmarshal(b, &server)
	}
	var target any
	if rc.Target != nil {
		if b, err := json.Marshal(rc.Target); err == nil {
			_ = json.Unmarshal(b, &target)
		}
	}
	m = Manifest{
		SchemaVersion: manifestSchemaVersion,
		Experiment: ManifestExperiment{
			Name:         rc.Name,
			StartedAtUTC: now().UTC().Format(time.RFC3339Nano),
			Status:       "running",
			Warmups:      rc.Warmups,
			Repeats:      rc.Repeats,
			Sessions:     1,
		},
		Config:      ManifestConfig{Original: loadgen.Sanitize(orig.Original()), Resolved: loadgen.Sanitize(rc.resolvedView())},
		Workload:    analysis.Workload{Path: rc.Prompts, SHA256: sha},
		Source:      ManifestSource{Git: *git},
		Environment: *env,
		Serving:     ManifestServing{Model: loadgen.Sanitize(model), Server: loadgen.Sanitize(server), Target: loadgen.Sanitize(target), Checkpoint: ck},
	}
	return &m, writeManifest(root, &m)
}

// writeManifest replaces root's manifest.json atomically. Members of the
// manifest as read (m.raw) that m does not hold are kept: the file is
// then written with sorted keys, as serving-inference writes it. A
// manifest serving-inference wrote is written as [writeServingInferenceManifest]
// says.
func writeManifest(root string, m *Manifest) error {
	if m.byServingInference() {
		return writeServingInferenceManifest(root, m)
	}
	b, err := files.MarshalIndent(m)
	if err != nil {
		return err
	}
	if m.raw != nil {
		var ours map[string]any
		if err := decodeJSONExact(b, &ours); err != nil {
			return err
		}
		if merged := mergeJSON(m.raw, ours); !reflect.DeepEqual(merged, ours) {
			if b, err = files.MarshalIndent(merged); err != nil {
				return err
			}
		}
	}
	return files.WriteAtomic(filepath.Join(root, files.ManifestFile), b)
}

// mergeJSON returns old with ours laid over it: ours' members replace
// old's, objects are merged member by member, and old's members that ours
// lacks are kept. Neither argument is changed.
func mergeJSON(old, ours map[string]any) map[string]any {
	out := make(map[string]any, len(old)+len(ours))
	for k, v := range old {
		out[k] = v
	}
	for k, v := range ours {
		o, ok1 := out[k].(map[string]any)
		n, ok2 := v.(map[string]any)
		if ok1 && ok2 {
			out[k] = mergeJSON(o, n)
		} else {
			out[k] = v
		}
	}
	return out
}
