package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/sweep/analysis"
	"github.com/tinyserve/tinyserve/sweep/internal/files"
	"github.com/tinyserve/tinyserve/sweep/loadgen"
	"github.com/tinyserve/tinyserve/sweep/report"
)

// TestHashCheckpointFiles: sizes and SHA-256 of the named files, in order;
// a missing file is an error.
func TestHashCheckpointFiles(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte("{}"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte("abc"), 0o644))
	files, err := hashCheckpointFiles(dir, []string{"model.safetensors", "config.json"})
	require.NoError(t, err)
	assert.Equal(t, []analysis.CheckpointFile{
		{Name: "model.safetensors", Bytes: 3, SHA256: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{Name: "config.json", Bytes: 2, SHA256: "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"},
	}, files)
	_, err = hashCheckpointFiles(dir, []string{"pytorch_model.bin"})
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// TestSweepRecordsCheckpoint: the files an embedded target loaded are
// recorded in manifest.json and named in report.md; a resume that loads
// other files (here config.json changed) refuses before sending anything
// and writes nothing, while the same files from another folder resume.
func TestSweepRecordsCheckpoint(t *testing.T) {
	dir := t.TempDir()
	f := newFakeServer(t, &fakeServer{})
	prompts := writePrompts(t, dir, 2, 1)
	cfgJSON := sweepConfigJSON(f.URL(), prompts, []int{1, 2}, 2, 0, 1)
	root := filepath.Join(dir, "results", "test-sweep")
	model := func(name, config string) *analysis.Checkpoint {
		ck := fakeCheckpoint(t, filepath.Join(dir, name), "config.json", config, "model.safetensors", "weights")
		ck.HubID, ck.Revision = "org/m", "c0ffee"
		return ck
	}
	first := model("m1", `{"n_layer": 2}`)
	target := func(ck *analysis.Checkpoint) func(*SweepOptions) {
		return func(o *SweepOptions) {
			o.Target = func(context.Context) (TargetInfo, error) {
				return TargetInfo{URL: f.URL(), Model: "fake-model", Checkpoint: ck}, nil
			}
		}
	}
	_, err := runTestSweep(t, context.Background(), cfgJSON, dir, target(first))
	require.NoError(t, err)
	var m Manifest
	b, err := os.ReadFile(filepath.Join(root, files.ManifestFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &m))
	assert.Equal(t, first, m.Serving.Checkpoint)
	report, err := os.ReadFile(filepath.Join(root, files.ReportFile))
	require.NoError(t, err)
	assert.Contains(t, string(report), "Model files (the embedded target's): `org/m` at commit `c0ffee` (`config.json` SHA-256 "+first.Files[0].SHA256[:16]+"…")

	// Undo the last run, so that the next invocation resumes.
	last := Order(20260729, []int{1, 2}, 0, 1)[1]
	require.NoError(t, os.Remove(last.RawPath(root)))
	require.NoError(t, os.Remove(last.SummaryPath(root)))
	require.NoError(t, os.Remove(filepath.Join(root, files.SummaryFile)))

	changed := model("m2", `{"n_layer": 3}`)
	sent := f.Requests.Load()
	before := snapshot(t, root)
	_, err = runTestSweep(t, context.Background(), cfgJSON, dir, target(changed))
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrRefused), "%v", err)
	assert.Contains(t, err.Error(), "config.json has SHA-256 "+changed.Files[0].SHA256+", was "+first.Files[0].SHA256)
	assert.Equal(t, sent, f.Requests.Load(), "nothing is sent when refusing")
	assert.Equal(t, before, snapshot(t, root), "nothing is written when refusing")

	_, err = runTestSweep(t, context.Background(), cfgJSON, dir, target(nil))
	require.ErrorIs(t, err, ErrRefused, "a model made in memory after one loaded from files")

	same := model("m3", `{"n_layer": 2}`) // the same files in another folder
	_, err = runTestSweep(t, context.Background(), cfgJSON, dir, target(same))
	require.NoError(t, err)
	b, err = os.ReadFile(filepath.Join(root, files.ManifestFile))
	require.NoError(t, err)
	m = Manifest{}
	require.NoError(t, json.Unmarshal(b, &m))
	require.Len(t, m.Resumes, 1)
	assert.Equal(t, same, m.Resumes[0].Checkpoint)
	assert.Equal(t, first, m.Serving.Checkpoint, "the first session's record stays")
}

// TestCheckpointDifferences lists new, changed and missing files.
func TestCheckpointDifferences(t *testing.T) {
	was := &analysis.Checkpoint{Files: []analysis.CheckpointFile{{Name: "a", SHA256: "1"}, {Name: "b", SHA256: "2"}}}
	now := &analysis.Checkpoint{Files: []analysis.CheckpointFile{{Name: "a", SHA256: "1"}, {Name: "b", SHA256: "3"}, {Name: "c", SHA256: "4"}}}
	assert.Equal(t, []string{"b has SHA-256 3, was 2", "c is new"}, differences(now, was))
	assert.Equal(t, []string{"b has SHA-256 2, was 3", "c is gone"}, differences(was, now))
	assert.Empty(t, differences(was, was))
	assert.True(t, strings.HasPrefix(describeCheckpoint(t, now), "`"), describeCheckpoint(t, now))
}

// TestCheckpointTokenizerElsewhere: tokenizer files outside the model's
// folder (a hub cache's snapshot, another folder) are named
// "tokenizer/NAME" with their folder recorded beside, so that the same
// bytes in a moved folder compare equal while changed bytes are named; a
// record written before (absolute names) compares equal to the same bytes.
func TestCheckpointTokenizerElsewhere(t *testing.T) {
	dir := t.TempDir()
	model := fakeCheckpoint(t, filepath.Join(dir, "m"), "config.json", `{"n_layer": 2}`, "tokenizer_config.json", "model's").Dir
	fakeCheckpoint(t, filepath.Join(dir, "hub1", "snap"), "vocab.json", "v", "merges.txt", "m", "tokenizer_config.json", "tok's")
	paths := func(root string) []string {
		var ps []string
		for _, n := range []string{"vocab.json", "merges.txt", "tokenizer_config.json"} {
			ps = append(ps, filepath.Join(root, "snap", n))
		}
		return ps
	}
	first, err := NewCheckpoint(model, []string{"config.json", "tokenizer_config.json"}, paths(filepath.Join(dir, "hub1")))
	require.NoError(t, err)
	var names []string
	for _, f := range first.Files {
		names = append(names, f.Name)
	}
	assert.Equal(t, []string{"config.json", "tokenizer_config.json", "tokenizer/vocab.json", "tokenizer/merges.txt", "tokenizer/tokenizer_config.json"}, names,
		"each file its own name, the model's tokenizer_config.json apart from the tokenizer's")
	assert.Equal(t, &analysis.CheckpointOrigin{Dir: filepath.Join(dir, "hub1", "snap")}, first.Tokenizer)
	assert.Equal(t, first.Files[4].SHA256, fileSHA(t, filepath.Join(dir, "hub1", "snap", "tokenizer_config.json")))
	assert.Contains(t, describeCheckpoint(t, first), ", the `tokenizer/` files from `"+filepath.Join(dir, "hub1", "snap")+"` (")
	first.Tokenizer.HubID, first.Tokenizer.Revision = "org/tok", "abc"
	assert.Contains(t, describeCheckpoint(t, first), ", the `tokenizer/` files from `org/tok` at commit `abc` (")

	// As the code before recorded them: by absolute path.
	old, err := hashCheckpointFiles(model, append([]string{"config.json", "tokenizer_config.json"}, paths(filepath.Join(dir, "hub1"))...))
	require.NoError(t, err)
	oldStyle := &analysis.Checkpoint{Dir: model, Files: old}

	// The cache moves: the same bytes elsewhere.
	require.NoError(t, os.Rename(filepath.Join(dir, "hub1"), filepath.Join(dir, "hub2")))
	moved, err := NewCheckpoint(model, []string{"config.json", "tokenizer_config.json"}, paths(filepath.Join(dir, "hub2")))
	require.NoError(t, err)
	assert.Empty(t, differences(moved, first), "the same bytes in a moved folder")
	assert.Empty(t, differences(moved, oldStyle), "an old record of the same bytes")
	assert.Empty(t, differences(oldStyle, moved))
	assert.True(t, filepath.IsAbs(oldStyle.Files[2].Name), "comparing leaves the record as it is")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "hub2", "snap", "merges.txt"), []byte("m2"), 0o644))
	changed, err := NewCheckpoint(model, []string{"config.json", "tokenizer_config.json"}, paths(filepath.Join(dir, "hub2")))
	require.NoError(t, err)
	want := []string{"tokenizer/merges.txt has SHA-256 " + changed.Files[3].SHA256 + ", was " + first.Files[3].SHA256}
	assert.Equal(t, want, differences(changed, first))
	assert.Equal(t, want, differences(changed, oldStyle))

	// A tokenizer file in the model's folder is named as the model's are.
	inside, err := NewCheckpoint(model, []string{"config.json"}, []string{filepath.Join(model, "tokenizer_config.json")})
	require.NoError(t, err)
	assert.Equal(t, "tokenizer_config.json", inside.Files[1].Name)
	assert.Nil(t, inside.Tokenizer)
}

// TestCheckpointTokenizerNamesNeverClash: tokenizer files from two folders
// (which the loader never reads, but a record must not lose one) keep
// their paths from the folder the two share; names that would clash with a
// model file's stay absolute.
func TestCheckpointTokenizerNamesNeverClash(t *testing.T) {
	dir := t.TempDir()
	model := fakeCheckpoint(t, filepath.Join(dir, "m"), "config.json", "{}").Dir
	fakeCheckpoint(t, filepath.Join(dir, "t", "a"), "vocab.json", "v")
	fakeCheckpoint(t, filepath.Join(dir, "t", "b"), "vocab.json", "w")
	ck, err := NewCheckpoint(model, []string{"config.json"}, []string{filepath.Join(dir, "t", "a", "vocab.json"), filepath.Join(dir, "t", "b", "vocab.json")})
	require.NoError(t, err)
	require.Len(t, ck.Files, 3)
	assert.Equal(t, "tokenizer/a/vocab.json", ck.Files[1].Name)
	assert.Equal(t, "tokenizer/b/vocab.json", ck.Files[2].Name)
	assert.Equal(t, filepath.Join(dir, "t"), ck.Tokenizer.Dir)

	fakeCheckpoint(t, filepath.Join(model, "tokenizer"), "vocab.json", "x")
	tok := filepath.Join(dir, "t", "a", "vocab.json")
	ck, err = NewCheckpoint(model, []string{"config.json", "tokenizer/vocab.json"}, []string{tok})
	require.NoError(t, err)
	assert.Equal(t, []string{"config.json", "tokenizer/vocab.json", tok}, []string{ck.Files[0].Name, ck.Files[1].Name, ck.Files[2].Name})
	assert.Nil(t, ck.Tokenizer)
	assert.Empty(t, differences(ck, ck))
}

func fileSHA(t *testing.T, path string) string {
	t.Helper()
	sum, err := loadgen.FileSHA256(path)
	require.NoError(t, err)
	return sum
}

// TestResumeChecksFirstRecordedCheckpoint: a sweep whose first session
// recorded no checkpoint (its manifest.json was written before they were
// recorded) takes the first resume's as the record: a later resume with
// other files refuses, one with the same files resumes.
func TestResumeChecksFirstRecordedCheckpoint(t *testing.T) {
	dir := t.TempDir()
	f := newFakeServer(t, &fakeServer{})
	prompts := writePrompts(t, dir, 2, 1)
	cfgJSON := sweepConfigJSON(f.URL(), prompts, []int{1, 2}, 2, 0, 1)
	root := filepath.Join(dir, "results", "test-sweep")
	model := func(name, config string) *analysis.Checkpoint {
		return fakeCheckpoint(t, filepath.Join(dir, name), "config.json", config)
	}
	run := func(ck *analysis.Checkpoint) error {
		_, err := runTestSweep(t, context.Background(), cfgJSON, dir, func(o *SweepOptions) {
			o.Target = func(context.Context) (TargetInfo, error) {
				return TargetInfo{URL: f.URL(), Model: "fake-model", Checkpoint: ck}, nil
			}
		})
		return err
	}
	undoLast := func() {
		last := Order(20260729, []int{1, 2}, 0, 1)[1]
		require.NoError(t, os.Remove(last.RawPath(root)))
		require.NoError(t, os.Remove(last.SummaryPath(root)))
		require.NoError(t, os.Remove(filepath.Join(root, files.SummaryFile)))
	}
	require.NoError(t, run(nil))
	undoLast()
	a := model("a", `{"n_layer": 2}`)
	require.NoError(t, run(a))
	undoLast()

	before := snapshot(t, root)
	err := run(model("b", `{"n_layer": 3}`))
	require.ErrorIs(t, err, ErrRefused, "other files than the first resume's")
	assert.Contains(t, err.Error(), "config.json has SHA-256")
	assert.Equal(t, before, snapshot(t, root), "nothing is written when refusing")
	require.ErrorIs(t, run(nil), ErrRefused, "no files after the first resume's")
	require.NoError(t, run(a))
}

// fakeCheckpoint writes the files of nameContents (a name, then its
// contents, ...) into dir and returns them as a Checkpoint.
func fakeCheckpoint(t *testing.T, dir string, nameContents ...string) *analysis.Checkpoint {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	var names []string
	for i := 0; i+1 < len(nameContents); i += 2 {
		names = append(names, nameContents[i])
		require.NoError(t, os.WriteFile(filepath.Join(dir, nameContents[i]), []byte(nameContents[i+1]), 0o644))
	}
	files, err := hashCheckpointFiles(dir, names)
	require.NoError(t, err)
	return &analysis.Checkpoint{Dir: dir, Files: files}
}

// describeCheckpoint is how report.md describes ck: the line the report
// writes for it, read back from the rendered report.
func describeCheckpoint(t *testing.T, ck *analysis.Checkpoint) string {
	t.Helper()
	const before, after = "Model files (the embedded target's): ", ".\n\n"
	md := report.Markdown(&analysis.Combined{Checkpoint: ck})
	_, line, ok := strings.Cut(md, before)
	require.True(t, ok, md)
	line, _, ok = strings.Cut(line, after)
	require.True(t, ok, md)
	return line
}
