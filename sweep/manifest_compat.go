package sweep

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tinyserve/tinyserve/sweep/internal/files"
)

// sessionsFile holds tinyserve's bookkeeping of the sessions of a sweep
// folder that serving-inference began (experiment.sessions and resumes,
// as a folder tinyserve began keeps them in manifest.json): that tool's
// manifest schema allows no member it does not name at the top level,
// and its manifest.json stays valid under it.
const sessionsFile = "tinyserve-sessions.json"

// sessionsRecord is sessionsFile.
type sessionsRecord struct {
	// Sessions counts the invocations that worked on the folder,
	// serving-inference's first one (session 1) included.
	Sessions int `json:"sessions"`
	// Resumes are tinyserve's invocations, as in manifest.json's resumes.
	Resumes []ManifestResume `json:"resumes"`
}

// PythonInfo is serving-inference's environment.python: the Python that
// ran its client, and the installed packages.
type PythonInfo struct {
	Version        string             `json:"version"`
	Implementation string             `json:"implementation"`
	Dependencies   []PythonDependency `json:"dependencies"`
}

// PythonDependency is one installed Python package.
type PythonDependency struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// byServingInference reports whether serving-inference wrote the manifest
// (began the folder): its manifests have environment.python, which its
// schema requires and tinyserve never writes.
func (m *Manifest) byServingInference() bool { return m.Environment.Python != nil }

// readSessions reads the sessions of a folder that serving-inference
// began from sessionsFile, when there is one. Without it (no tinyserve
// session yet, or only ones by a tinyserve that kept them in manifest.json)
// the manifest's own are kept. A manifest tinyserve wrote is left as it is.
func (m *Manifest) readSessions(root string) error {
	if !m.byServingInference() {
		return nil
	}
	path := filepath.Join(root, sessionsFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	var r sessionsRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%w: %s is not valid (%v); it is kept as evidence: choose a new name or --output-root", ErrRefused, path, err)
	}
	m.Experiment.Sessions, m.Resumes = r.Sessions, r.Resumes
	return nil
}

// dropTinyserveKeys removes from a serving-inference manifest as read
// (raw) what a tinyserve before issue 27 added to it when resuming the
// folder, all of it outside that tool's schema or meaningless there: the
// top-level resumes, experiment.sessions (both now in sessionsFile), and
// the empty environment.go, system.arch and system.num_cpu of the Go
// structs it wrote the manifest through.
func dropTinyserveKeys(raw map[string]any) {
	delete(raw, "resumes")
	if exp, ok := raw["experiment"].(map[string]any); ok {
		delete(exp, "sessions")
	}
	env, ok := raw["environment"].(map[string]any)
	if !ok {
		return
	}
	if g, ok := env["go"].(map[string]any); ok && len(g) == 1 && g["version"] == "" {
		delete(env, "go")
	}
	if sys, ok := env["system"].(map[string]any); ok {
		if sys["arch"] == "" {
			delete(sys, "arch")
		}
		if n, ok := sys["num_cpu"]; ok && fmt.Sprint(n) == "0" {
			delete(sys, "num_cpu")
		}
	}
}

// writeServingInferenceManifest writes the state of a sweep whose folder
// serving-inference began: sessionsFile first, then manifest.json as that
// tool wrote it with only experiment.status and completed_at_utc set,
// the members its own resume changes (run_experiment.py), so that the
// manifest stays valid under its schema and says nothing in tinyserve's
// terms. A crash between the two leaves a session counted that measured
// nothing, which is harmless.
func writeServingInferenceManifest(root string, m *Manifest) error {
	if m.raw == nil {
		return fmt.Errorf("%s: serving-inference's manifest was not read", filepath.Join(root, files.ManifestFile))
	}
	resumes := m.Resumes
	if resumes == nil {
		resumes = []ManifestResume{}
	}
	b, err := files.MarshalIndent(sessionsRecord{Sessions: m.Experiment.Sessions, Resumes: resumes})
	if err != nil {
		return err
	}
	if err := files.WriteAtomic(filepath.Join(root, sessionsFile), b); err != nil {
		return err
	}
	out := make(map[string]any, len(m.raw))
	for k, v := range m.raw {
		out[k] = v
	}
	exp := map[string]any{}
	if old, ok := m.raw["experiment"].(map[string]any); ok {
		for k, v := range old {
			exp[k] = v
		}
	}
	exp["status"], exp["completed_at_utc"] = m.Experiment.Status, m.Experiment.CompletedAtUTC
	out["experiment"] = exp
	if b, err = files.MarshalIndent(out); err != nil {
		return err
	}
	return files.WriteAtomic(filepath.Join(root, files.ManifestFile), b)
}

// The benchmark clients that write sweep folders.
const (
	toolTinyserve        = "tinyserve"
	toolServingInference = "serving-inference"
)

// setup is what one session of a sweep ran on: the tool whose client
// measured, that tool's source revision, and the machine.
type setup struct {
	tool   string
	source ManifestSource
	env    Environment
}

// client names the benchmark client: the tool, its revision and its
// language's runtime ("serving-inference 3342ed5 (CPython 3.12.3, aiohttp
// 3.9.5)", "tinyserve 1a2b3c4 (Go go1.26.0 amd64)").
func (s setup) client() string {
	var b strings.Builder
	b.WriteString(s.tool)
	if rev := s.source.Git.describe(); rev != "" {
		b.WriteString(" " + rev)
	}
	var rt []string
	if p := s.env.Python; p != nil {
		impl := p.Implementation
		if impl == "" {
			impl = "Python"
		}
		rt = append(rt, strings.TrimSpace(impl+" "+p.Version))
		for _, d := range p.Dependencies {
			if strings.EqualFold(d.Name, "aiohttp") {
				rt = append(rt, "aiohttp "+d.Version)
			}
		}
	} else if g := s.goToolchain(); g != "" {
		rt = append(rt, "Go "+g)
	}
	if len(rt) > 0 {
		b.WriteString(" (" + strings.Join(rt, ", ") + ")")
	}
	return b.String()
}

// goToolchain is the Go version and the architecture it built for.
func (s setup) goToolchain() string {
	return strings.TrimSpace(s.env.Go.Version + " " + s.env.System.Arch)
}

// system is the session's system record read as meant, with which of its
// members the session's tool records.
type system struct {
	os, release, version, machine string
	hasVersion, hasMachine        bool
}

// system reads the session's environment.system. A record of a tinyserve
// before issue 27 (os the lower-case GOOS, kernel the release, no release
// or machine; this one's os always has a capital, uname's or osName's) is
// read as meant: its kernel is the release, and the kernel's version and
// the machine are not recorded.
func (s setup) system() system {
	sys := s.env.System
	v := system{os: sys.OS, release: sys.Release, version: sys.Kernel, machine: sys.Machine, hasVersion: true, hasMachine: true}
	if s.tool == toolTinyserve && sys.OS != "" && sys.OS == strings.ToLower(sys.OS) && sys.Release == "" && sys.Machine == "" {
		v.os, v.release, v.version = osName(sys.OS), sys.Kernel, ""
		v.hasVersion, v.hasMachine = false, false
	}
	return v
}

// changes calls add with each aspect of the set-up, as s's value and o's,
// that both sessions record with one meaning. Sessions of two tools differ
// in the benchmark client, which names each tool's revision and runtime:
// their revisions (of two repositories) and toolchains (Python, Go) are
// not compared apart, nor the CPU, which serving-inference does not
// record. The OS, the kernel (release and version), the machine and the
// GPUs both tools record; between two tools, one that a session left
// empty (tinyserve has no uname on Windows) is taken as not recorded.
func (s setup) changes(o setup, add func(what, a, b string)) {
	same := s.tool == o.tool
	if !same {
		all := add
		add = func(what, a, b string) {
			if strings.TrimSpace(a) != "" && strings.TrimSpace(b) != "" {
				all(what, a, b)
			}
		}
	}
	if same {
		add("source revision", s.source.Git.describe(), o.source.Git.describe())
	} else {
		add("benchmark client:", s.client(), o.client())
	}
	if same && s.tool == toolTinyserve {
		add("Go", s.goToolchain(), o.goToolchain())
	}
	a, b := s.system(), o.system()
	add("OS", a.os, b.os)
	ka, kb := a.release, b.release
	if a.hasVersion && b.hasVersion {
		ka, kb = strings.TrimSpace(ka+" "+a.version), strings.TrimSpace(kb+" "+b.version)
	}
	add("kernel", ka, kb)
	if a.hasMachine && b.hasMachine {
		add("machine", a.machine, b.machine)
	}
	if same && s.tool == toolTinyserve {
		add("CPU", fmt.Sprintf("%s ×%d", s.env.System.CPUModel, s.env.System.NumCPU), fmt.Sprintf("%s ×%d", o.env.System.CPUModel, o.env.System.NumCPU))
	}
	add("GPUs", s.env.Accelerator.describe(), o.env.Accelerator.describe())
}
