package sweep

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/sweep/internal/files"
	"github.com/tinyserve/tinyserve/sweep/loadgen"
	"github.com/tinyserve/tinyserve/sweep/report"
)

// siSchemaPath is serving-inference's manifest schema, copied verbatim
// (testdata/serving-inference/README.md says from where).
var siSchemaPath = filepath.Join("..", "testdata", "serving-inference", "experiment-manifest.schema.json")

// siSchema compiles serving-inference's manifest schema (draft 2020-12).
func siSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(siSchemaPath)
	require.NoError(t, err)
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	const url = "https://github.com/DanLoran/serving-inference/schemas/experiment-manifest.schema.json"
	require.NoError(t, c.AddResource(url, doc))
	s, err := c.Compile(url)
	require.NoError(t, err)
	return s
}

// validateSI returns why the manifest b is invalid under
// serving-inference's schema, or nil.
func validateSI(t *testing.T, s *jsonschema.Schema, b []byte) error {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err)
	return s.Validate(v)
}

// siManifest is a manifest.json as serving-inference's build_manifest
// (scripts/experiment_manifest.py at 3342ed5) writes it, sort_keys and
// all, for a sweep of sweepConfigJSON's shape that measured on a Linux
// machine with one H100, on which the sweep then failed.
func siManifest(prompts, sha string) string {
	return fmt.Sprintf(`{
  "config": {
    "original": {"concurrency": [1, 2], "model": "fake-model", "name": "test-sweep"},
    "resolved": {"concurrency": [1, 2], "model": "fake-model", "name": "test-sweep", "stream": true}
  },
  "environment": {
    "accelerator": {"cuda_version": "12.4", "driver_version": "550.90.07", "gpus": [{"name": "NVIDIA H100 80GB HBM3", "vram_mib": 81559}], "nvidia_smi_available": true},
    "python": {"dependencies": [{"name": "aiohttp", "version": "3.9.5"}, {"name": "transformers", "version": "4.46.3"}], "implementation": "CPython", "version": "3.12.3"},
    "system": {"kernel": "#45-Ubuntu SMP PREEMPT_DYNAMIC Fri Aug 30 12:02:04 UTC 2024", "machine": "x86_64", "os": "Linux", "release": "6.8.0-45-generic"}
  },
  "experiment": {"completed_at_utc": "2026-07-29T10:00:00.000000Z", "name": "test-sweep", "repeats": 1, "started_at_utc": "2026-07-29T09:00:00.000000Z", "status": "failed", "warmups": 0},
  "schema_version": "1.0",
  "serving": {"model": {"name": "fake-model", "revision": "main"}, "server": {"discovery": "explicit", "launch_flags": []}, "vllm": {"fingerprint": "sha256:abc", "installed": true, "version": "0.21.0"}},
  "source": {"git": {"available": true, "dirty": false, "revision": "3342ed512db4c44726bde822b498fe134c9f3bb0"}},
  "workload": {"path": %q, "sha256": %q}
}
`, prompts, sha)
}

// sameMachineEnv is the environment of the machine siManifest describes,
// as tinyserve records it (given as JSON, so that the test also builds
// where Environment lacks a field).
func sameMachineEnv(t *testing.T) *Environment {
	t.Helper()
	var e Environment
	require.NoError(t, json.Unmarshal([]byte(`{
  "go": {"version": "go1.26.0"},
  "system": {"os": "Linux", "release": "6.8.0-45-generic", "kernel": "#45-Ubuntu SMP PREEMPT_DYNAMIC Fri Aug 30 12:02:04 UTC 2024", "machine": "x86_64", "arch": "amd64", "cpu_model": "AMD EPYC 9454", "num_cpu": 16},
  "accelerator": {"nvidia_smi_available": true, "gpus": [{"name": "NVIDIA H100 80GB HBM3", "vram_mib": 81559}], "driver_version": "550.90.07"}
}`), &e))
	return &e
}

// servingInferenceFolder makes the folder results/test-sweep under dir
// as serving-inference leaves it after measuring the first of the two
// runs of sweepConfigJSON(f, prompts, [1 2], n, 0, 1): its config.json,
// the given manifest.json, and that run's records and summary. It returns
// the config and the folder.
func servingInferenceFolder(t *testing.T, dir, url string, n int, manifest func(prompts, sha string) string) ([]byte, string) {
	t.Helper()
	prompts := writePrompts(t, dir, n, 2)
	cfgJSON := sweepConfigJSON(url, prompts, []int{1, 2}, n, 0, 1)
	root := filepath.Join(dir, "results", "test-sweep")
	first := Order(20260729, []int{1, 2}, 0, 1)[0]
	require.NoError(t, os.MkdirAll(filepath.Join(root, first.Dir()), 0o755))

	var cfg map[string]any
	require.NoError(t, json.Unmarshal(cfgJSON, &cfg))
	b, _ := json.MarshalIndent(cfg, "", "  ") // sort_keys=True, as run_experiment.py writes it
	require.NoError(t, os.WriteFile(filepath.Join(root, files.ConfigFile), append(b, '\n'), 0o644))
	sha, err := loadgen.FileSHA256(prompts)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, files.ManifestFile), []byte(manifest(prompts, sha)), 0o644))
	var lines []string
	for i := range n {
		lines = append(lines, fmt.Sprintf(`{"schema_version": "1.0", "id": "w_%06d", "request_index": %d, "workload": "w", "prompt_tokens": 10, "target_prompt_tokens": 10, "target_output_tokens": 2, "status": 200, "started_offset_s": 0.0, "ended_offset_s": 0.5, "latency_s": 0.5, "ttft_s": 0.05, "approx_time_per_output_token_s": 0.4, "observed_inter_chunk_latency_s": [0.4], "output_tokens": 2, "server_token_usage_present": true, "finish_reason": "length", "stream_text_event_count": 2, "malformed_stream_events": 0}`, i, i))
	}
	require.NoError(t, os.WriteFile(first.RawPath(root), []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	summary := fmt.Sprintf(`{"config": {"url": %q, "model": "fake-model", "num_requests": %d, "concurrency": %d, "stream": true, "temperature": 0.0, "store_response": false, "result_schema_version": "1.0"},
  "counts": {"attempted": %d, "successful": %d, "failed": 0, "output_tokens": %d}, "duration_s": 0.6, "request_throughput_per_s": 3.3, "output_token_throughput_per_s": 6.6,
  "latency_s": {"count": 2, "mean": 0.5, "p50": 0.5, "p90": 0.5, "p99": 0.5}, "ttft_s": {"count": 2, "mean": 0.05, "p50": 0.05, "p90": 0.05, "p99": 0.05},
  "approx_time_per_output_token_s": {"count": 2, "mean": 0.4, "p50": 0.4, "p90": 0.4, "p99": 0.4}, "observed_inter_chunk_latency_s": {"count": 2, "mean": 0.4, "p50": 0.4, "p90": 0.4, "p99": 0.4}}
`, url, n, first.Concurrency, n, n, 2*n)
	require.NoError(t, os.WriteFile(first.SummaryPath(root), []byte(summary), 0o644))
	return cfgJSON, root
}

// jsonObject decodes a JSON object.
func jsonObject(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}

// TestServingInferenceFolderStaysValid: a sweep folder that
// serving-inference began (its config.json, manifest.json and one
// complete run) is resumed here, twice. Its manifest.json stays valid
// under that tool's schema and changes only as that tool's own resume
// changes it (experiment.status and completed_at_utc): what it records
// beyond tinyserve's fields (the vLLM version it measured, the Python
// packages, the CUDA version) stays, and tinyserve's bookkeeping of its
// sessions goes to tinyserve-sessions.json beside it, read back by the
// next resume. On the same machine, the only difference the report
// names is the benchmark client.
func TestServingInferenceFolderStaysValid(t *testing.T) {
	schema := siSchema(t)
	dir := t.TempDir()
	f := newFakeServer(t, &fakeServer{})
	const n = 2
	cfgJSON, root := servingInferenceFolder(t, dir, f.URL(), n, siManifest)
	original := readFile(t, filepath.Join(root, files.ManifestFile))
	require.NoError(t, validateSI(t, schema, original), "the fixture is a valid serving-inference manifest")

	resume := func() *SweepResult {
		t.Helper()
		res, err := runTestSweep(t, context.Background(), cfgJSON, dir, func(o *SweepOptions) {
			o.Environment = sameMachineEnv(t)
		})
		require.NoError(t, err)
		return res
	}
	res := resume()
	assert.Equal(t, 1, res.Kept)
	assert.Equal(t, 1, res.Measured)

	b := readFile(t, filepath.Join(root, files.ManifestFile))
	assert.NoError(t, validateSI(t, schema, b), "manifest.json after a resume:\n%s", b)
	got, want := jsonObject(t, b), jsonObject(t, original)
	exp := got["experiment"].(map[string]any)
	assert.Equal(t, "completed", exp["status"])
	assert.NotEqual(t, "2026-07-29T10:00:00.000000Z", exp["completed_at_utc"])
	wantExp := want["experiment"].(map[string]any)
	wantExp["status"], wantExp["completed_at_utc"] = exp["status"], exp["completed_at_utc"]
	assert.Equal(t, want, got, "manifest.json changes as serving-inference's own resume changes it, and no more")

	side := jsonObject(t, readFile(t, filepath.Join(root, "tinyserve-sessions.json")))
	assert.Equal(t, 2.0, side["sessions"], "serving-inference's invocation was session 1")
	require.Len(t, side["resumes"], 1)
	assert.Equal(t, 2.0, side["resumes"].([]any)[0].(map[string]any)["session"])

	const client = "benchmark client: serving-inference 3342ed512db4c44726bde822b498fe134c9f3bb0 (CPython 3.12.3, aiohttp 3.9.5) in session 1, tinyserve (Go go1.26.0 amd64) in session "
	assert.Equal(t, []string{client + "2"}, res.Combined.SessionChanges,
		"the same machine: the client is the one difference")
	assert.Contains(t, report.Markdown(res.Combined), "resumed with different software or hardware** ("+client+"2)")

	// Undo the last run: the next resume is session 3, and knows session 2.
	last := Order(20260729, []int{1, 2}, 0, 1)[1]
	require.NoError(t, os.Remove(last.RawPath(root)))
	require.NoError(t, os.Remove(last.SummaryPath(root)))
	require.NoError(t, os.Remove(filepath.Join(root, files.SummaryFile)))
	res = resume()
	assert.Equal(t, 1, res.Measured)
	b = readFile(t, filepath.Join(root, files.ManifestFile))
	assert.NoError(t, validateSI(t, schema, b), "manifest.json after a second resume:\n%s", b)
	side = jsonObject(t, readFile(t, filepath.Join(root, "tinyserve-sessions.json")))
	assert.Equal(t, 3.0, side["sessions"])
	require.Len(t, side["resumes"], 2)
	assert.Equal(t, 3.0, side["resumes"].([]any)[1].(map[string]any)["session"])
	assert.Equal(t, []string{client + "3"}, res.Combined.SessionChanges)

	m, err := existingManifest(root)
	require.NoError(t, err)
	assert.Equal(t, 3, m.Experiment.Sessions, "what resume checks read knows the sessions")
	assert.Len(t, m.Resumes, 2)
}

// TestServingInferenceFolderRepaired: a serving-inference folder that an
// earlier tinyserve resumed holds that version's bookkeeping in
// manifest.json (resumes, experiment.sessions, an empty environment.go
// and system.arch, num_cpu 0), which the schema refuses. The next resume
// moves the sessions to tinyserve-sessions.json and leaves the manifest
// as serving-inference wrote it.
func TestServingInferenceFolderRepaired(t *testing.T) {
	schema := siSchema(t)
	dir := t.TempDir()
	f := newFakeServer(t, &fakeServer{})
	polluted := func(prompts, sha string) string {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(siManifest(prompts, sha)), &m))
		m["experiment"].(map[string]any)["sessions"] = 2
		env := m["environment"].(map[string]any)
		env["go"] = map[string]any{"version": ""}
		sys := env["system"].(map[string]any)
		sys["arch"], sys["num_cpu"] = "", 0
		m["resumes"] = []any{map[string]any{"session": 2, "started_at_utc": "2026-08-01T00:00:00Z",
			"source": map[string]any{"git": map[string]any{"available": true, "revision": "aaaa", "dirty": false}},
			"environment": map[string]any{"go": map[string]any{"version": "go1.25.0"}, "system": map[string]any{"os": "linux", "arch": "amd64", "kernel": "6.8.0-45-generic", "num_cpu": 16},
				"accelerator": map[string]any{"nvidia_smi_available": false, "gpus": []any{}}}}}
		b, err := json.MarshalIndent(m, "", "  ")
		require.NoError(t, err)
		return string(b)
	}
	cfgJSON, root := servingInferenceFolder(t, dir, f.URL(), 2, polluted)
	require.Error(t, validateSI(t, schema, readFile(t, filepath.Join(root, files.ManifestFile))), "the earlier bookkeeping breaks the schema")

	res, err := runTestSweep(t, context.Background(), cfgJSON, dir, func(o *SweepOptions) { o.Environment = sameMachineEnv(t) })
	require.NoError(t, err)
	assert.Equal(t, 1, res.Measured)
	b := readFile(t, filepath.Join(root, files.ManifestFile))
	assert.NoError(t, validateSI(t, schema, b), "manifest.json:\n%s", b)
	got := jsonObject(t, b)
	assert.NotContains(t, got["experiment"], "sessions")
	assert.NotContains(t, got["environment"], "go")
	assert.Equal(t, map[string]any{"kernel": "#45-Ubuntu SMP PREEMPT_DYNAMIC Fri Aug 30 12:02:04 UTC 2024", "machine": "x86_64", "os": "Linux", "release": "6.8.0-45-generic"},
		got["environment"].(map[string]any)["system"])
	side := jsonObject(t, readFile(t, filepath.Join(root, "tinyserve-sessions.json")))
	assert.Equal(t, 3.0, side["sessions"])
	resumes := side["resumes"].([]any)
	require.Len(t, resumes, 2)
	assert.Equal(t, "aaaa", resumes[0].(map[string]any)["source"].(map[string]any)["git"].(map[string]any)["revision"], "the earlier resume is kept")
	assert.Equal(t, 3.0, resumes[1].(map[string]any)["session"])
}

// TestTinyserveFolderKeepsItsManifest: a folder that tinyserve began
// keeps its bookkeeping in manifest.json, as before, and no sessions file.
func TestTinyserveFolderKeepsItsManifest(t *testing.T) {
	dir := t.TempDir()
	f := &fakeServer{TokenTime: time.Millisecond}
	cfgJSON, _ := interruptedSweep(t, dir, f, 4, []int{1, 2}, 0, 2, 1+2*4+2)
	_, err := runTestSweep(t, context.Background(), cfgJSON, dir, nil)
	require.NoError(t, err)
	root := filepath.Join(dir, "results", "test-sweep")
	var m Manifest
	require.NoError(t, json.Unmarshal(readFile(t, filepath.Join(root, files.ManifestFile)), &m))
	assert.Equal(t, 2, m.Experiment.Sessions)
	require.Len(t, m.Resumes, 1)
	assert.NoFileExists(t, filepath.Join(root, "tinyserve-sessions.json"))
}

// manifestOf decodes a manifest given as JSON.
func manifestOf(t *testing.T, s string) *Manifest {
	t.Helper()
	var m Manifest
	require.NoError(t, json.Unmarshal([]byte(s), &m))
	return &m
}

// TestSessionChangesCompareLikeWithLike: the mixed-set-up warning names
// the benchmark client when two tools measured the rows, and compares
// only what both sessions record with one meaning: not the revisions of
// two tools' repositories, not a Go toolchain against a Python one, not
// a CPU one of them does not record; and a manifest of an earlier
// tinyserve (os "linux", kernel holding the release string) against a
// new one.
func TestSessionChangesCompareLikeWithLike(t *testing.T) {
	si := `"source": {"git": {"available": true, "dirty": true, "revision": "3342ed5"}},
  "environment": {
    "python": {"version": "3.12.3", "implementation": "CPython", "dependencies": [{"name": "numpy", "version": "2.0.0"}]},
    "system": {"os": "Linux", "release": "6.8.0-45-generic", "kernel": "#45-Ubuntu SMP", "machine": "x86_64"},
    "accelerator": {"nvidia_smi_available": true, "gpus": [{"name": "NVIDIA H100 80GB HBM3", "vram_mib": 81559}], "driver_version": "550.90.07", "cuda_version": "12.4"}}`
	resume := func(system string) string {
		return `"resumes": [{"session": 2, "source": {"git": {"available": true, "dirty": false, "revision": "bbbbbbb"}},
  "environment": {"go": {"version": "go1.26.0"}, "system": ` + system + `,
    "accelerator": {"nvidia_smi_available": true, "gpus": [{"name": "NVIDIA H100 80GB HBM3", "vram_mib": 81559}], "driver_version": "550.90.07"}}}]`
	}
	same := `{"os": "Linux", "release": "6.8.0-45-generic", "kernel": "#45-Ubuntu SMP", "machine": "x86_64", "arch": "amd64", "cpu_model": "AMD EPYC", "num_cpu": 16}`
	m := manifestOf(t, "{"+si+", "+resume(same)+"}")
	assert.Equal(t, []string{"benchmark client: serving-inference 3342ed5 (modified) (CPython 3.12.3) in session 1, tinyserve bbbbbbb (Go go1.26.0 amd64) in session 2"},
		m.sessionChanges([]int{1, 2}))

	other := `{"os": "Linux", "release": "6.8.0-50-generic", "kernel": "#51-Ubuntu SMP", "machine": "aarch64", "arch": "arm64", "cpu_model": "Neoverse", "num_cpu": 72}`
	m = manifestOf(t, "{"+si+", "+resume(other)+"}")
	assert.Equal(t, []string{
		"benchmark client: serving-inference 3342ed5 (modified) (CPython 3.12.3) in session 1, tinyserve bbbbbbb (Go go1.26.0 arm64) in session 2",
		"kernel 6.8.0-45-generic #45-Ubuntu SMP in session 1, 6.8.0-50-generic #51-Ubuntu SMP in session 2",
		"machine x86_64 in session 1, aarch64 in session 2",
	}, m.sessionChanges([]int{1, 2}), "no CPU: serving-inference records none")

	// What a session of one tool left empty is not a difference from the
	// other tool's record (tinyserve on Windows has no uname).
	windows := `{"os": "Windows", "arch": "amd64", "num_cpu": 8}`
	m = manifestOf(t, "{"+si+", "+resume(windows)+"}")
	assert.Equal(t, []string{
		"benchmark client: serving-inference 3342ed5 (modified) (CPython 3.12.3) in session 1, tinyserve bbbbbbb (Go go1.26.0 amd64) in session 2",
		"OS Linux in session 1, Windows in session 2",
	}, m.sessionChanges([]int{1, 2}))

	// An earlier tinyserve's first session against this one's resume, on
	// the same machine: nothing; with another kernel release, that alone.
	old := `"source": {"git": {"available": true, "dirty": false, "revision": "bbbbbbb"}},
  "environment": {"go": {"version": "go1.26.0"}, "system": {"os": "linux", "arch": "amd64", "kernel": "6.8.0-45-generic", "cpu_model": "AMD EPYC", "num_cpu": 16},
    "accelerator": {"nvidia_smi_available": true, "gpus": [{"name": "NVIDIA H100 80GB HBM3", "vram_mib": 81559}], "driver_version": "550.90.07"}}`
	m = manifestOf(t, "{"+old+", "+resume(same)+"}")
	assert.Empty(t, m.sessionChanges([]int{1, 2}))
	newer := strings.Replace(same, "6.8.0-45-generic", "6.8.0-50-generic", 1)
	m = manifestOf(t, "{"+old+", "+resume(newer)+"}")
	assert.Equal(t, []string{"kernel 6.8.0-45-generic in session 1, 6.8.0-50-generic in session 2"}, m.sessionChanges([]int{1, 2}))

	// Two tinyserve sessions compare everything tinyserve records.
	m = manifestOf(t, `{"source": {"git": {"available": true, "dirty": false, "revision": "aaaaaaa"}},
  "environment": {"go": {"version": "go1.25.0"}, "system": `+same+`, "accelerator": {"nvidia_smi_available": false, "gpus": []}}, `+resume(other)+"}")
	assert.Equal(t, []string{
		"source revision aaaaaaa in session 1, bbbbbbb in session 2",
		"Go go1.25.0 amd64 in session 1, go1.26.0 arm64 in session 2",
		"kernel 6.8.0-45-generic #45-Ubuntu SMP in session 1, 6.8.0-50-generic #51-Ubuntu SMP in session 2",
		"machine x86_64 in session 1, aarch64 in session 2",
		"CPU AMD EPYC ×16 in session 1, Neoverse ×72 in session 2",
		"GPUs none in session 1, NVIDIA H100 80GB HBM3 550.90.07 in session 2",
	}, m.sessionChanges([]int{1, 2}))
}

// pythonPlatform is what Python's platform module says here, or nil when
// there is no python3.
func pythonPlatform(t *testing.T) map[string]string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		return nil
	}
	out, err := exec.Command(py, "-c", `import json, platform; print(json.dumps({"os": platform.system(), "release": platform.release(), "kernel": platform.version(), "machine": platform.machine()}))`).Output()
	require.NoError(t, err)
	var m map[string]string
	require.NoError(t, json.Unmarshal(out, &m))
	return m
}

// TestSystemInfoMeansWhatServingInferenceRecords: environment.system's
// keys that serving-inference's manifest also has hold what it puts
// there: os is platform.system() ("Linux"), release platform.release()
// (uname -r), kernel platform.version() (uname -v, the kernel's build
// string), machine platform.machine() (uname -m). Checked against
// python3 when there is one, and against uname.
func TestSystemInfoMeansWhatServingInferenceRecords(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no uname here")
	}
	b, err := json.Marshal(collectEnvironment(context.Background()).System)
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(b, &got))
	uname := func(flag string) string {
		out, err := exec.Command("uname", flag).Output()
		require.NoError(t, err)
		return strings.TrimSpace(string(out))
	}
	want := map[string]string{"os": uname("-s"), "release": uname("-r"), "kernel": uname("-v"), "machine": uname("-m")}
	if runtime.GOOS == "linux" {
		assert.Equal(t, "Linux", want["os"])
		v, err := os.ReadFile("/proc/sys/kernel/version")
		require.NoError(t, err)
		assert.Equal(t, strings.TrimSpace(string(v)), want["kernel"])
	}
	for k, v := range want {
		assert.Equal(t, v, got[k], "system.%s against uname", k)
	}
	if py := pythonPlatform(t); py != nil {
		for k, v := range py {
			assert.Equal(t, v, got[k], "system.%s against Python's platform", k)
		}
	} else {
		t.Log("no python3: compared with uname only")
	}
}

// TestAcceleratorReasonMeansWhatServingInferenceRecords: accelerator.reason
// says why nvidia-smi gave nothing the way serving-inference's
// run_command does: the Python exception's name, or exit_code_N.
func TestAcceleratorReasonMeansWhatServingInferenceRecords(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no sh here")
	}
	ctx := context.Background()
	_, why := runCmdWhy(ctx, "", "tinyserve-no-such-command")
	assert.Equal(t, "FileNotFoundError", why)
	_, why = runCmdWhy(ctx, "", "sh", "-c", "exit 3")
	assert.Equal(t, "exit_code_3", why)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, why = runCmdWhy(short, "", "sleep", "5")
	assert.Equal(t, "TimeoutExpired", why)
	out, why := runCmdWhy(ctx, "", "echo", " x ")
	assert.Equal(t, "", why)
	assert.Equal(t, "x", out)
}
