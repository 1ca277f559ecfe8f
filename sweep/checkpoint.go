package sweep

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tinyserve/tinyserve/internal/hfhub"
	"github.com/tinyserve/tinyserve/sweep/analysis"
	"github.com/tinyserve/tinyserve/sweep/internal/files"
	"github.com/tinyserve/tinyserve/sweep/loadgen"
)

// NewCheckpoint hashes the files an embedded target loaded from the model
// folder dir (absolute): modelFiles named relative to dir, then the
// tokenizer's files at tokenizerPaths (absolute, or relative to the
// working directory). A tokenizer file in dir is named relative to it, as
// the model's are; the others are named with TokenizerPrefix, and their
// folder is recorded as Tokenizer (without HubID and Revision, which the
// caller knows how to read).
func NewCheckpoint(dir string, modelFiles, tokenizerPaths []string) (*analysis.Checkpoint, error) {
	names := slices.Clone(modelFiles)
	for _, p := range tokenizerPaths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		if rel, err := filepath.Rel(dir, abs); err == nil && filepath.IsLocal(rel) {
			abs = rel
		}
		names = append(names, abs)
	}
	files, err := hashCheckpointFiles(dir, names)
	if err != nil {
		return nil, err
	}
	ck := &analysis.Checkpoint{Dir: dir, Files: files}
	if tdir := relocateTokenizerFiles(ck.Files); tdir != "" {
		ck.Tokenizer = &analysis.CheckpointOrigin{Dir: tdir}
		// A hub cache's snapshot is recorded with its id and commit
		// (--tokenizer ORG/NAME, --tokenizer-revision).
		ck.Tokenizer.HubID, ck.Tokenizer.Revision, _ = hfhub.SnapshotOf(tdir)
	}
	return ck, nil
}

// relocateTokenizerFiles renames, in files, those named by an absolute
// path (the tokenizer's files outside the model's folder: nothing else is
// named so) to TokenizerPrefix and their path relative to the folder they
// are in, and returns that folder: "" when none is renamed. That folder is
// the nearest one that holds them all. The tokenizer's files are
// read from one folder (the one its tokenizer.json or vocab.json is in),
// so in practice it is theirs and the names are "tokenizer/" and their
// base names; were they from two folders, each would keep its path from
// the folder the two share ("tokenizer/a/vocab.json",
// "tokenizer/b/merges.txt"), so two files never share a name. Where the
// new names would clash with another file's (a model file named
// "tokenizer/tokenizer.json") or no folder holds them all (two Windows
// volumes), all keep their absolute names: a resume from elsewhere is then
// refused, never wrongly accepted.
func relocateTokenizerFiles(files []analysis.CheckpointFile) string {
	var abs []string
	taken := map[string]bool{}
	for _, f := range files {
		if filepath.IsAbs(f.Name) {
			abs = append(abs, f.Name)
		} else {
			taken[f.Name] = true
		}
	}
	if len(abs) == 0 {
		return ""
	}
	dir := commonDir(abs)
	if dir == "" {
		return ""
	}
	renamed := map[string]string{}
	for _, p := range abs {
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return ""
		}
		n := analysis.TokenizerPrefix + filepath.ToSlash(rel)
		if taken[n] {
			return ""
		}
		taken[n] = true
		renamed[p] = n
	}
	for i := range files {
		if n, ok := renamed[files[i].Name]; ok {
			files[i].Name = n
		}
	}
	return dir
}

// commonDir is the nearest folder that holds every one of paths
// (absolute), or "" when none does.
func commonDir(paths []string) string {
	dir := filepath.Dir(paths[0])
	for _, p := range paths {
		for {
			if rel, err := filepath.Rel(dir, p); err == nil && filepath.IsLocal(rel) {
				break
			}
			up := filepath.Dir(dir)
			if up == dir {
				return ""
			}
			dir = up
		}
	}
	return dir
}

// hashCheckpointFiles returns the size and SHA-256 of each named file of
// dir (an absolute name is taken as it is), in the order given.
func hashCheckpointFiles(dir string, names []string) ([]analysis.CheckpointFile, error) {
	files := make([]analysis.CheckpointFile, 0, len(names))
	for _, n := range names {
		p := n
		if !filepath.IsAbs(n) {
			p = filepath.Join(dir, n)
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		sum, err := loadgen.FileSHA256(p)
		if err != nil {
			return nil, err
		}
		files = append(files, analysis.CheckpointFile{Name: n, Bytes: fi.Size(), SHA256: sum})
	}
	return files, nil
}

// differences lists how c's files differ from was's (by name and
// content; where the folders are does not matter), or nil when they
// agree. A record written before tokenizer files outside the model's
// folder were named with TokenizerPrefix (by their absolute path) is
// compared as if it were named so.
func differences(c, was *analysis.Checkpoint) []string {
	now, before := slices.Clone(c.Files), slices.Clone(was.Files)
	relocateTokenizerFiles(now)
	relocateTokenizerFiles(before)
	old := map[string]string{}
	for _, f := range before {
		old[f.Name] = f.SHA256
	}
	var diffs []string
	for _, f := range now {
		switch sum, ok := old[f.Name]; {
		case !ok:
			diffs = append(diffs, f.Name+" is new")
		case sum != f.SHA256:
			diffs = append(diffs, fmt.Sprintf("%s has SHA-256 %s, was %s", f.Name, f.SHA256, sum))
		}
		delete(old, f.Name)
	}
	for _, f := range before {
		if _, gone := old[f.Name]; gone {
			diffs = append(diffs, f.Name+" is gone")
		}
	}
	return diffs
}

// checkpointFrom says where c's files were read, for an error.
func checkpointFrom(c *analysis.Checkpoint) string {
	if c.Tokenizer != nil {
		return fmt.Sprintf("%s, the tokenizer's from %s", c.Dir, c.Tokenizer.Dir)
	}
	return c.Dir
}

// checkCheckpoint refuses to resume the sweep in root with a checkpoint
// whose files differ from those its manifest records: the runs there
// measured other weights. The record is the first session's
// (serving.checkpoint) or, when it has none (its manifest was written
// before checkpoints were recorded), the first resume's that has one. A
// manifest without any (none written yet, or a model made in memory)
// accepts any.
func checkCheckpoint(root string, ck *analysis.Checkpoint) error {
	m, err := existingManifest(root)
	if m == nil {
		return err
	}
	was := m.Serving.Checkpoint
	for _, r := range m.Resumes {
		if was != nil {
			break
		}
		was = r.Checkpoint
	}
	switch {
	case was == nil:
		return nil
	case ck == nil:
		return fmt.Errorf("%w: %s records the checkpoint files the runs there measured, but the embedded target now loaded none; resuming would mix two models: measure afresh with a new name or --output-root",
			ErrRefused, filepath.Join(root, files.ManifestFile))
	}
	if diffs := differences(ck, was); len(diffs) > 0 {
		return fmt.Errorf("%w: the embedded target loaded other files than the runs in %s measured (%s; now from %s); resuming would mix two models: restore them, or measure afresh with a new name or --output-root",
			ErrRefused, root, strings.Join(diffs, "; "), checkpointFrom(ck))
	}
	return nil
}
