package sweep

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"github.com/tinyserve/tinyserve/sweep/analysis"
	"github.com/tinyserve/tinyserve/sweep/internal/files"
	"github.com/tinyserve/tinyserve/sweep/loadgen"
)

// runState is what checkRun found on disk for one run.
type runState int

const (
	runAbsent runState = iota
	runComplete
)

// runIsComplete classifies a run's files under root: absent (nothing there) or
// complete (its row count, all-200 statuses and summary counts match n and
// its concurrency). Everything else is an error wrapping [ErrRefused]: one
// file without the other, unparsable files, or a run that is incomplete or
// finished with failed requests, because such evidence must neither be
// overwritten nor silently built on.
func runIsComplete(root string, spec analysis.RunSpec, n int) (complete bool, err error) {
	st, err := checkRun(root, spec, n, "")
	return st == runComplete, err
}

// checkRun is [runIsComplete]; when workloadSHA is not empty, a run whose
// summary records another prompt file's SHA-256 is refused too.
func checkRun(root string, spec analysis.RunSpec, n int, workloadSHA string) (runState, error) {
	raw, sum := spec.RawPath(root), spec.SummaryPath(root)
	rawOK, err := files.Exists(raw)
	if err != nil {
		return 0, err
	}
	sumOK, err := files.Exists(sum)
	if err != nil {
		return 0, err
	}
	switch {
	case !rawOK && !sumOK:
		return runAbsent, nil
	case !rawOK || !sumOK:
		present, missing := raw, filepath.Base(sum)
		if !rawOK {
			present, missing = sum, filepath.Base(raw)
		}
		return 0, fmt.Errorf("%w: refusing to overwrite partial run: %s has no %s beside it: %s", ErrRefused, present, missing, orphanAdvice(present))
	}
	rows, err := loadgen.ReadRecords(raw)
	if err != nil {
		return 0, fmt.Errorf("%w: invalid completed run %s: %v", ErrRefused, raw, err)
	}
	s, err := loadgen.ReadSummary(sum)
	if err != nil {
		return 0, fmt.Errorf("%w: invalid completed run %s: %v", ErrRefused, sum, err)
	}
	failed := 0
	for _, r := range rows {
		if !r.OK() {
			failed++
		}
	}
	if failed > 0 || s.Counts.Failed > 0 {
		return 0, fmt.Errorf("%w: run %s finished with %d failed requests; it is kept as evidence and never overwritten: use a new name or --output-root", ErrRefused, raw, max(failed, s.Counts.Failed))
	}
	if got := s.Config.WorkloadSHA256; workloadSHA != "" && got != "" && got != workloadSHA {
		return 0, fmt.Errorf("%w: run %s was measured with a prompt file of SHA-256 %s, but the prompt file now has SHA-256 %s: restore the prompt file, or measure afresh with a new name or --output-root",
			ErrRefused, raw, got, workloadSHA)
	}
	if len(rows) != n || s.Counts.Attempted != n || s.Counts.Successful != n || s.Config.Concurrency != spec.Concurrency {
		return 0, fmt.Errorf("%w: run %s is incomplete or does not match the config (%d records, summary attempted %d successful %d at concurrency %d; want %d at concurrency %d): use a new name or --output-root",
			ErrRefused, raw, len(rows), s.Counts.Attempted, s.Counts.Successful, s.Config.Concurrency, n, spec.Concurrency)
	}
	return runComplete, nil
}

// scanRuns checks every run of order under root (see checkRun): which are
// complete already, and whether all are.
func scanRuns(root string, order []analysis.RunSpec, n int, workloadSHA string) (complete []bool, allDone bool, err error) {
	complete = make([]bool, len(order))
	allDone = true
	for i, spec := range order {
		st, err := checkRun(root, spec, n, workloadSHA)
		if err != nil {
			return nil, false, err
		}
		complete[i] = st == runComplete
		allDone = allDone && complete[i]
	}
	return complete, allDone, nil
}

// checkResumeWarmups applies checkRun to every resume warm-up run under
// root (they are not in the sweep's order): one that failed, or has only
// one of its two files, refuses the folder as any run would.
func checkResumeWarmups(root string, n int, workloadSHA string) error {
	files, err := filepath.Glob(filepath.Join(root, analysis.KindResumeWarmup+"-*", "concurrency-*"))
	if err != nil {
		return err
	}
	seen := map[analysis.RunSpec]bool{}
	for _, f := range files {
		var spec analysis.RunSpec
		spec.Kind = analysis.KindResumeWarmup
		if _, err := fmt.Sscanf(filepath.Base(filepath.Dir(f)), analysis.KindResumeWarmup+"-%d", &spec.Index); err != nil {
			continue
		}
		if _, err := fmt.Sscanf(filepath.Base(f), "concurrency-%d", &spec.Concurrency); err != nil {
			continue
		}
		if seen[spec] {
			continue
		}
		seen[spec] = true
		if _, err := checkRun(root, spec, n, workloadSHA); err != nil {
			return err
		}
	}
	return nil
}

// made says what makeRoot created, so that a sweep that fails before
// its first run can take back exactly that and nothing else.
type made struct {
	// dirs are the folders that did not exist, root first, then each
	// parent made for it (an --output-root that was not there).
	dirs   []string
	config bool // config.json did not exist
}

// removeDirs takes back the folders m made, deepest first, each only if it
// is empty.
func (m made) removeDirs() {
	for _, d := range m.dirs {
		if os.Remove(d) != nil {
			return
		}
	}
}

// makeRoot makes the folder root if it is not there, recording what it
// made.
func makeRoot(root string) (made, error) {
	var m made
	for d := root; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || filepath.Dir(d) == d {
			break
		}
		m.dirs = append(m.dirs, d)
	}
	return m, os.MkdirAll(root, 0o755)
}

// claimRoot, under the lock, makes root this sweep's folder: an existing
// config.json must equal the config (as JSON values), and a folder without
// one must hold nothing but the lock and the temporary config.json or lock
// of a sweep that was killed writing it (removed here); anything else is
// someone else's. wrote says whether it wrote config.json.
func claimRoot(root string, original any) (wrote bool, err error) {
	if ok, err := sameConfig(root, original); err != nil || ok {
		return false, err
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return false, err
	}
	var stale []string
	for _, e := range entries {
		switch name := e.Name(); {
		case name == lockFile:
		case strings.HasPrefix(name, "."+files.ConfigFile+".tmp-"), strings.HasPrefix(name, "."+lockFile+".tmp-"):
			stale = append(stale, filepath.Join(root, name))
		default:
			return false, fmt.Errorf("%w: %s is not empty and has no %s; choose a new name or --output-root", ErrRefused, root, files.ConfigFile)
		}
	}
	for _, path := range stale {
		if err := os.Remove(path); err != nil {
			return false, err
		}
	}
	return claimConfig(root, original)
}

// claimConfig writes config.json in a folder that had none; wrote says
// whether it did. Another sweep started at the same moment may have
// written one since the check: an equal config is then this sweep's as
// well (their lock decides which of them runs, and the other is told that
// another sweep is using the folder), and a different one is refused as
// any other.
func claimConfig(root string, original any) (wrote bool, err error) {
	err = writeConfig(root, original)
	if errors.Is(err, fs.ErrExist) {
		_, err = sameConfig(root, original)
		return false, err
	}
	return err == nil, err
}

// sameConfig reports whether root's config.json exists and equals the
// config; one that differs, or is not JSON, is refused.
func sameConfig(root string, original any) (bool, error) {
	cfgPath := filepath.Join(root, files.ConfigFile)
	b, err := os.ReadFile(cfgPath)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	var existing any
	if err := decodeJSONExact(b, &existing); err != nil {
		return false, fmt.Errorf("%w: %s is not valid JSON: %v", ErrRefused, cfgPath, err)
	}
	if !reflect.DeepEqual(sameNumbers(existing), sameNumbers(original)) {
		return false, fmt.Errorf("%w: the experiment config differs from the one in %s; choose a new name or --output-root", ErrRefused, cfgPath)
	}
	return true, nil
}

// sameNumbers returns a copy of the JSON value v (decoded with
// [decodeJSONExact]) whose numbers are spelled one way per value, exactly,
// so that configs compare as JSON values: 0.0 equals 0 and 1e3 equals 1000,
// while two seeds that one float64 would hold are still told apart.
func sameNumbers(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, item := range t {
			out[k] = sameNumbers(item)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, item := range t {
			out[i] = sameNumbers(item)
		}
		return out
	case json.Number:
		return numberKey(t)
	default:
		return v
	}
}

// numberKey spells n one way per value: an integer literal exactly (a
// float64 would merge seeds above 2^53), anything else as its float64,
// written as an integer when it is one that a float64 holds exactly.
func numberKey(n json.Number) string {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		if i, ok := new(big.Int).SetString(s, 10); ok {
			return i.String()
		}
	}
	f, err := n.Float64()
	if err != nil {
		return s
	}
	if f == math.Trunc(f) && math.Abs(f) <= 1<<53 {
		return strconv.FormatFloat(f+0, 'f', -1, 64) // +0 turns -0 into 0
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// writeConfig writes config.json, refusing to replace one.
func writeConfig(root string, original any) error {
	b, err := files.MarshalIndent(original)
	if err != nil {
		return err
	}
	return files.WriteNew(filepath.Join(root, files.ConfigFile), b)
}

// checkWorkload refuses a sweep folder whose manifest records a prompt file
// with another SHA-256 than sha: resuming would mix runs of two workloads
// under one config. A manifest that cannot be read is refused too, since
// starting a fresh one would overwrite it.
func checkWorkload(root, prompts, sha string) error {
	m, err := existingManifest(root)
	if m == nil {
		return err
	}
	if got := m.Workload.SHA256; got != "" && got != sha {
		return fmt.Errorf("%w: the prompt file %s has SHA-256 %s, but %s records SHA-256 %s for the runs already there; resuming would mix two workloads: restore the prompt file, or measure afresh with a new name or --output-root",
			ErrRefused, prompts, sha, filepath.Join(root, files.ManifestFile), got)
	}
	return nil
}

// existingManifest reads root's manifest.json: nil without an error when
// there is none, and an error wrapping ErrRefused when it does not parse or
// has another schema version.
func existingManifest(root string) (*Manifest, error) {
	path := filepath.Join(root, files.ManifestFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %s is not a valid manifest (%v); it is kept as evidence: choose a new name or --output-root", ErrRefused, path, err)
	}
	if m.SchemaVersion != manifestSchemaVersion {
		return nil, fmt.Errorf("%w: %s has schema_version %q, not %q; it is kept as evidence: choose a new name or --output-root", ErrRefused, path, m.SchemaVersion, manifestSchemaVersion)
	}
	// A folder serving-inference began keeps tinyserve's sessions beside
	// its manifest.
	if err := m.readSessions(root); err != nil {
		return nil, err
	}
	return &m, nil
}
