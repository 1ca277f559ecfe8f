//go:build unix

package sweep

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/mock"
	"github.com/tinyserve/tinyserve/openai"
	"github.com/tinyserve/tinyserve/sweep/internal/files"
)

// The kill test runs sweeps in child processes (this test binary, running
// TestSweepKillChild) and SIGKILLs them: a kill runs no deferred code, so
// only a real process shows what a killed sweep leaves on disk.
const (
	killChildDir = "TINYSERVE_SWEEP_KILL_DIR" // the folder holding config and prompts
	killChildAt  = "TINYSERVE_SWEEP_KILL_AT"  // the crash point at which the child kills itself
)

// TestSweepKillChild is the child's side: a mock-backed sweep in the
// folder the parent names, killing itself at the crash point it names.
// Without the parent's environment it does nothing.
func TestSweepKillChild(t *testing.T) {
	dir := os.Getenv(killChildDir)
	if dir == "" {
		t.Skip("only run as TestSweepKillsHeavy's child")
	}
	if at, _ := strconv.Atoi(os.Getenv(killChildAt)); at > 0 {
		n := 0
		files.CrashHook = func(string) {
			if n++; n == at {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal is on its way
			}
		}
		defer func() { files.CrashHook = nil }()
	}
	eng, err := mock.NewEngine(mock.Config{}, engine.Config{MaxNumSeqs: 4, Seed: new(uint64(1))})
	require.NoError(t, err)
	defer eng.Close()
	srv := httptest.NewServer(openai.NewHandler(eng))
	defer srv.Close()
	cfgJSON, err := os.ReadFile(filepath.Join(dir, "sweep.json"))
	require.NoError(t, err)
	cfg, err := parseConfig(cfgJSON)
	require.NoError(t, err)
	cfg.Model = "" // the served model's name, as for an embedded target
	env, git := testEnv()
	_, err = RunSweep(context.Background(), cfg, SweepOptions{WorkDir: dir, Environment: env, Git: git,
		URL: srv.URL + "/v1/completions", Model: eng.Info().ID, MetricsInterval: -1})
	require.NoError(t, err)
}

// killChild runs one child sweep in dir: it kills itself at crash point
// at (0: never), or the parent kills it after delay (0: never). killed
// says whether it died of SIGKILL; any other end but success fails.
func killChild(t *testing.T, dir string, at int, delay time.Duration) (killed bool, took time.Duration) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSweepKillChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), killChildDir+"="+dir, killChildAt+"="+strconv.Itoa(at))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	require.NoError(t, cmd.Start())
	if delay > 0 {
		timer := time.AfterFunc(delay, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
		defer timer.Stop()
	}
	err := cmd.Wait()
	took = time.Since(start)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true, took
		}
	}
	require.NoError(t, err, "the sweep (rerun after a kill) failed:\n%s", out.String())
	return false, took
}

// published hashes every run's published records and summary under root:
// once there, each must stay byte for byte whatever happens next.
func published(t *testing.T, root string) map[string][32]byte {
	t.Helper()
	if _, err := os.Stat(root); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	all := snapshot(t, root)
	for name := range all {
		base := filepath.Base(name)
		if !strings.HasPrefix(base, "concurrency-") || !(strings.HasSuffix(base, ".jsonl") || strings.HasSuffix(base, ".summary.json")) {
			delete(all, name)
		}
	}
	return all
}

// TestSweepKillsHeavy: a mock-backed sweep killed (SIGKILL) at every crash point
// between two states of its files, and at random instants, is rerun after
// each kill: the rerun must finish the sweep (resuming, never refusing),
// and every run published before a kill must stay byte-identical. A
// killed sweep's lock is found stale and taken over. It starts about a
// hundred processes (7 s); under the race detector they take a second
// each, so it skips there and .ci/run runs it without (-run Heavy).
func TestSweepKillsHeavy(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("starts a hundred processes: run without -race and -short (.ci/run does)")
	}
	base := t.TempDir()
	newFolder := func(name string) string {
		dir := filepath.Join(base, name)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		prompts := writePrompts(t, dir, 3, 2)
		cfg := sweepConfigJSON("http://replaced.invalid/v1/completions", prompts, []int{1, 2}, 3, 0, 1)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "sweep.json"), cfg, 0o644))
		return dir
	}
	root := func(dir string) string { return filepath.Join(dir, "results", "test-sweep") }
	// rerunAfterKill checks a kill's folder: a rerun completes the sweep,
	// keeps what was published, and leaves no lock and no temporaries.
	rerunAfterKill := func(dir, what string) time.Duration {
		before := published(t, root(dir))
		killed, took := killChild(t, dir, 0, 0)
		require.False(t, killed)
		after := published(t, root(dir))
		for name, sum := range before {
			require.Equal(t, sum, after[name], "%s: %s changed on the rerun", what, name)
		}
		complete, allDone, err := scanRuns(root(dir), Order(20260729, []int{1, 2}, 0, 1), 3, "")
		require.NoError(t, err, what)
		require.True(t, allDone, "%s: runs complete %v", what, complete)
		require.NoFileExists(t, filepath.Join(root(dir), lockFile), what)
		for name := range snapshot(t, root(dir)) {
			b := filepath.Base(name)
			require.False(t, strings.Contains(b, ".tmp-") || strings.HasSuffix(b, pendingSuffix) || strings.Contains(b, lockFile),
				"%s: %s left behind", what, name)
		}
		return took
	}

	// Every crash point, in a fresh folder each: the child kills itself
	// there; the rerun must complete. The first point past the last one
	// is the end of a whole sweep.
	kills := 0
	var full time.Duration
	for at := 1; ; at++ {
		dir := newFolder(fmt.Sprintf("point-%02d", at))
		killed, took := killChild(t, dir, at, 0)
		if !killed {
			full = took
			t.Logf("%d crash points in a whole sweep (%v)", at-1, took)
			break
		}
		kills++
		rerunAfterKill(dir, fmt.Sprintf("killed at crash point %d", at))
	}
	require.Greater(t, kills, 20, "the crash points cover the publication of every file")

	// Random instants: kill each rerun again until one finishes, checking
	// after every kill that what was published stays.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	seed := rng.Uint64()
	rng = rand.New(rand.NewPCG(seed, 0))
	t.Logf("random kill instants from seed %d", seed)
	randomKills := 0
	for folder := 0; randomKills < 30; folder++ {
		dir := newFolder(fmt.Sprintf("random-%02d", folder))
		for try := 0; try < 20; try++ {
			before := published(t, root(dir))
			delay := time.Duration(rng.Int64N(int64(full))) + time.Millisecond
			killed, _ := killChild(t, dir, 0, delay)
			after := published(t, root(dir))
			for name, sum := range before {
				require.Equal(t, sum, after[name], "seed %d: %s changed after a kill at %v", seed, name, delay)
			}
			if !killed {
				break
			}
			randomKills++
		}
		rerunAfterKill(dir, fmt.Sprintf("seed %d, folder %d", seed, folder))
	}
	t.Logf("%d kills at crash points, %d at random instants", kills, randomKills)
}
