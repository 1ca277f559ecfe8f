package sweep

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/sweep/internal/files"
)

// TestCollectGitFingerprintsEdits: a clean checkout has no fingerprint; a
// modified one has one that changes with every further edit, to a tracked
// file or to an untracked one, and comes back when the edit is undone.
func TestCollectGitFingerprintsEdits(t *testing.T) {
	dir, git := newGitRepo(t)
	write := func(name, text string) { writeIn(t, dir, name, text) }
	write("a.go", "package a\n")
	write(".gitignore", "results/\n")
	git("add", ".")
	git("commit", "-q", "-m", "one")

	ctx := context.Background()
	clean := collectGit(ctx, dir, "")
	require.True(t, clean.Available)
	require.NotNil(t, clean.Dirty)
	assert.False(t, *clean.Dirty)
	assert.Empty(t, clean.DiffSHA256)
	assert.Equal(t, clean.Revision, clean.describe())

	write("a.go", "package a\n\n// one edit\n")
	first := collectGit(ctx, dir, "")
	require.True(t, *first.Dirty)
	require.Len(t, first.DiffSHA256, 64)
	assert.Equal(t, clean.Revision+" (modified: "+first.DiffSHA256[:12]+")", first.describe())

	write("a.go", "package a\n\n// another edit\n")
	second := collectGit(ctx, dir, "")
	assert.NotEqual(t, first.DiffSHA256, second.DiffSHA256, "a further edit to a tracked file")
	write("a.go", "package a\n\n// anothex edit\n")
	assert.NotEqual(t, second.DiffSHA256, collectGit(ctx, dir, "").DiffSHA256, "an edit that keeps the diff's length")
	write("a.go", "package a\n\n// another edit\n")

	write("new.go", "package a\n")
	third := collectGit(ctx, dir, "")
	assert.NotEqual(t, second.DiffSHA256, third.DiffSHA256, "a new untracked file")
	write("new.go", "package a // changed\n")
	fourth := collectGit(ctx, dir, "")
	assert.NotEqual(t, third.DiffSHA256, fourth.DiffSHA256, "an edit to an untracked file")

	big := strings.Repeat("x", untrackedHashLimit+1)
	write("big.bin", big)
	withBig := collectGit(ctx, dir, "")
	write("big.bin", big+"x")
	assert.NotEqual(t, withBig.DiffSHA256, collectGit(ctx, dir, "").DiffSHA256, "a large untracked file counts by its size")
	require.NoError(t, os.Remove(filepath.Join(dir, "big.bin")))

	require.NoError(t, os.MkdirAll(filepath.Join(dir, "results"), 0o755))
	write("results/run.json", "{}")
	assert.Equal(t, fourth.DiffSHA256, collectGit(ctx, dir, "").DiffSHA256, "ignored files do not count")

	require.NoError(t, os.Remove(filepath.Join(dir, "new.go")))
	write("a.go", "package a\n\n// one edit\n")
	assert.Equal(t, first.DiffSHA256, collectGit(ctx, dir, "").DiffSHA256, "the same changes, the same fingerprint")
}

// TestCollectGitFingerprintsWholeTree: the fingerprint covers the whole
// checkout wherever in it the sweep runs, and the contents of untracked
// files whose names git would quote (non-ASCII, spaces at the ends).
func TestCollectGitFingerprintsWholeTree(t *testing.T) {
	dir, git := newGitRepo(t)
	write := func(name, text string) { writeIn(t, dir, name, text) }
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	write("sub/a.go", "package a\n")
	git("add", ".")
	git("commit", "-q", "-m", "one")
	write("sub/a.go", "package a // edited\n")

	ctx := context.Background()
	sub := filepath.Join(dir, "sub")
	write("top.go", "one")
	before := collectGit(ctx, sub, "")
	write("top.go", "two")
	assert.NotEqual(t, before.DiffSHA256, collectGit(ctx, sub, "").DiffSHA256, "an untracked file outside the working directory")

	for _, name := range []string{"café.go", " spaced.go"} {
		write(name, "one")
		before := collectGit(ctx, dir, "")
		write(name, "two")
		assert.NotEqual(t, before.DiffSHA256, collectGit(ctx, dir, "").DiffSHA256, "an edit to untracked %q", name)
	}
}

// TestCollectGitLeavesOutOutputRoot: a sweep whose output root lies in the
// checkout, not ignored, does not see its own files as a modified tree, so
// that resuming it is not reported as running on other software.
func TestCollectGitLeavesOutOutputRoot(t *testing.T) {
	dir, git := newGitRepo(t)
	write := func(name, text string) { writeIn(t, dir, name, text) }
	write("a.go", "package a\n")
	git("add", ".")
	git("commit", "-q", "-m", "one")

	ctx := context.Background()
	root := filepath.Join(dir, "out", "exp[1]") // glob characters are taken literally
	write("out/exp[1]/manifest.json", "{}")
	clean := collectGit(ctx, dir, root)
	require.NotNil(t, clean.Dirty)
	assert.False(t, *clean.Dirty, "the output root's files are no modification")
	assert.True(t, *collectGit(ctx, dir, "").Dirty, "without the output root left out they are")

	write("a.go", "package a // edited\n")
	first := collectGit(ctx, dir, root)
	require.True(t, *first.Dirty)
	write("out/exp[1]/run-01/summary.json", "{}")
	assert.Equal(t, first.DiffSHA256, collectGit(ctx, dir, root).DiffSHA256, "a new run's files change nothing")
	write("out/exp1", "x")
	assert.NotEqual(t, first.DiffSHA256, collectGit(ctx, dir, root).DiffSHA256, "a file the root's name only matches as a glob counts")
}

// newGitRepo makes an empty git repository in a temporary folder and
// returns it with a function that runs git there (with a fixed identity
// and none of the user's configuration); it skips the test without git.
func newGitRepo(t *testing.T) (string, func(args ...string)) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	git("init", "-q")
	return dir, git
}

// writeIn writes text to the file name under dir, making its folders.
func writeIn(t *testing.T, dir, name, text string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
}

// TestSweepInCheckoutIsNotModifiedByItsOwnOutput runs a sweep, then resumes
// it, in a clean checkout whose output folder git does not ignore: the
// manifest records a clean tree both times, so the resume reports no
// change of software (the sweep passes its output root to the git check).
func TestSweepInCheckoutIsNotModifiedByItsOwnOutput(t *testing.T) {
	dir, git := newGitRepo(t)
	f := &fakeServer{TokenTime: time.Millisecond}
	const n = 4
	prompts := writePrompts(t, dir, n, 2)
	git("add", ".")
	git("commit", "-q", "-m", "prompts")
	cfgJSON, _ := interruptedSweepWith(t, dir, f, prompts, n, []int{1, 2}, 0, 2, 1+2*n+2, realGit)
	res, err := runTestSweep(t, context.Background(), cfgJSON, dir, realGit)
	require.NoError(t, err)
	var m Manifest
	b, err := os.ReadFile(filepath.Join(res.Root, files.ManifestFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &m))
	require.True(t, m.Source.Git.Available)
	require.NotNil(t, m.Source.Git.Dirty)
	assert.False(t, *m.Source.Git.Dirty, "the first session's tree: only the sweep's own files were new")
	require.Len(t, m.Resumes, 1)
	assert.False(t, *m.Resumes[0].Source.Git.Dirty, "the resume's tree, holding the first session's results")
	assert.Empty(t, res.Combined.SessionChanges)
}

// realGit makes a test sweep describe the checkout it runs in.
func realGit(o *SweepOptions) { o.Git = nil }
