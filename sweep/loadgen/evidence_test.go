package loadgen

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// committedPrompts is a prompt file of serving-inference's, kept in the
// repository.
const committedPrompts = "../../testdata/serving-inference/prompts/mixed.jsonl"

// TestMeasureToFiles: the records and the summary land beside each other,
// the model is the server's when none is named, the summary names the
// workload by content, and a second run with the same output is refused
// before anything is sent.
func TestMeasureToFiles(t *testing.T) {
	dir := t.TempDir()
	f := newFakeServer(t, &fakeServer{})
	c := Condition{Options: LoadOptions{URL: f.URL(), Concurrency: 2, Stream: true},
		Prompts: committedPrompts, NumRequests: 3, Output: filepath.Join(dir, "out", "c2.jsonl")}
	ev, err := MeasureToFiles(context.Background(), c)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "out", "c2.summary.json"), c.SummaryPath())
	assert.Equal(t, 3, ev.Summary.Counts.Successful)
	assert.Equal(t, "fake-model", ev.Summary.Config.Model, "the first model the server lists")
	prompts, err := os.ReadFile(c.Prompts)
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("%x", sha256.Sum256(prompts)), ev.Summary.Config.WorkloadSHA256)
	onDisk, err := os.ReadFile(c.SummaryPath())
	require.NoError(t, err)
	assert.Equal(t, string(ev.SummaryJSON), string(onDisk))
	recs, err := ReadRecords(c.Output)
	require.NoError(t, err)
	assert.Len(t, recs, 3)

	sent := f.Requests.Load()
	_, err = MeasureToFiles(context.Background(), c)
	assert.ErrorContains(t, err, "refusing to overwrite "+c.Output)
	assert.Equal(t, sent, f.Requests.Load(), "nothing is sent when refusing")
}

// TestMeasureToFilesRefusesFirst: bad options are named as flags, and an
// unreachable server is ErrUnreachable, both before any file exists.
func TestMeasureToFilesRefusesFirst(t *testing.T) {
	dir := t.TempDir()
	c := Condition{Options: LoadOptions{URL: "http://127.0.0.1:1/v1/completions", Concurrency: -1},
		Prompts: committedPrompts, NumRequests: 2, Output: filepath.Join(dir, "r.jsonl")}
	_, err := MeasureToFiles(context.Background(), c)
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "--concurrency:"), err.Error())

	c.Options.Concurrency, c.Options.Model = 1, "m"
	_, err = MeasureToFiles(context.Background(), c)
	require.ErrorIs(t, err, ErrUnreachable)
	assert.NoFileExists(t, c.Output)
	assert.NoFileExists(t, c.SummaryPath())
}

// TestWriteNewFileNeverReplaces: a file already at the path is kept, and
// the error says so with fs.ErrExist; no temporary file is left behind.
func TestWriteNewFileNeverReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s.json")
	require.NoError(t, WriteNewFile(p, []byte("first\n")))
	err := WriteNewFile(p, []byte("second\n"))
	require.True(t, errors.Is(err, fs.ErrExist), "%v", err)
	b, _ := os.ReadFile(p)
	assert.Equal(t, "first\n", string(b))
	entries, _ := os.ReadDir(dir)
	assert.Len(t, entries, 1, "no temporary file is left")
}
