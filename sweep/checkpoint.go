package sweep

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tinyserve/tinyserve/internal/hfhub"
	"github.com/tinyserve/tinyserve/sweep/internal/files"
)

// Checkpoint identifies by content the model files an embedded target
// loaded. A config names a model by path or Hugging Face id, and the files
// behind a name can change between invocations (a new `hf download` moves
// refs/main, a folder is rewritten), so the manifest records what was
// read, and a resumed sweep that finds other files refuses to mix them.
//
// Files are compared by name and content only: where they were read
// (Dir, Tokenizer.Dir) is recorded for the reader and never compared, so
// the same files in a moved folder or hub cache resume.
type Checkpoint struct {
	// Dir is the folder the files were read from.
	Dir string `json:"dir"`
	// HubID and Revision name the Hugging Face repository and the
	// snapshot's commit when Dir is in the local hub cache.
	HubID    string `json:"hub_id,omitempty"`
	Revision string `json:"revision,omitempty"`
	// Tokenizer is the folder the tokenizer's files were read from when
	// not Dir (--tokenizer naming another folder or hub id); nil when they
	// were in Dir, or there were none.
	Tokenizer *CheckpointOrigin `json:"tokenizer,omitempty"`
	// Files are the files read: the model's (config.json,
	// generation_config.json, the weights and their index), then the
	// tokenizer's (tokenizer.json, or vocab.json and merges.txt, and the
	// configs beside them).
	Files []CheckpointFile `json:"files"`
}

// CheckpointOrigin is where some of a Checkpoint's files were read.
type CheckpointOrigin struct {
	Dir string `json:"dir"`
	// HubID and Revision name the Hugging Face repository and the
	// snapshot's commit when Dir is in a hub cache.
	HubID    string `json:"hub_id,omitempty"`
	Revision string `json:"revision,omitempty"`
}

// CheckpointFile is one file of a Checkpoint.
type CheckpointFile struct {
	// Name is the file's path relative to Checkpoint.Dir, or for a
	// tokenizer file outside it TokenizerPrefix and its path relative to
	// Checkpoint.Tokenizer.Dir ("tokenizer/tokenizer.json"). Manifests
	// written before tinyserve recorded Tokenizer name those files by
	// their absolute path; they compare as if named the new way (see
	// relocateTokenizerFiles).
	Name   string `json:"name"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// TokenizerPrefix begins the names of the tokenizer's files that were not
// in the model's folder: "tokenizer/" and their path relative to the
// tokenizer's folder. A name rather than the path: a hub cache moves
// (another HF_HOME, another machine), a tokenizer folder named by a
// relative path moves with the working directory, and the same bytes
// there measure the same model. The prefix keeps them apart from the model's files of the
// same name (both folders may have a tokenizer_config.json) and says in
// manifest.json and report.md what they are.
const TokenizerPrefix = "tokenizer/"

// NewCheckpoint hashes the files an embedded target loaded from the model
// folder dir (absolute): modelFiles named relative to dir, then the
// tokenizer's files at tokenizerPaths (absolute, or relative to the
// working directory). A tokenizer file in dir is named relative to it, as
// the model's are; the others are named with TokenizerPrefix, and their
// folder is recorded as Tokenizer (without HubID and Revision, which the
// caller knows how to read).
func NewCheckpoint(dir string, modelFiles, tokenizerPaths []string) (*Checkpoint, error) {
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
	files, err := HashCheckpointFiles(dir, names)
	if err != nil {
		return nil, err
	}
	ck := &Checkpoint{Dir: dir, Files: files}
	if tdir := relocateTokenizerFiles(ck.Files); tdir != "" {
		ck.Tokenizer = &CheckpointOrigin{Dir: tdir}
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
func relocateTokenizerFiles(files []CheckpointFile) string {
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
		n := TokenizerPrefix + filepath.ToSlash(rel)
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

// HashCheckpointFiles returns the size and SHA-256 of each named file of
// dir (an absolute name is taken as it is), in the order given.
func HashCheckpointFiles(dir string, names []string) ([]CheckpointFile, error) {
	files := make([]CheckpointFile, 0, len(names))
	for _, n := range names {
		p := n
		if !filepath.IsAbs(n) {
			p = filepath.Join(dir, n)
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		sum, err := FileSHA256(p)
		if err != nil {
			return nil, err
		}
		files = append(files, CheckpointFile{Name: n, Bytes: fi.Size(), SHA256: sum})
	}
	return files, nil
}

// differences lists how c's files differ from was's (by name and
// content; where the folders are does not matter), or nil when they
// agree. A record written before tokenizer files outside the model's
// folder were named with TokenizerPrefix (by their absolute path) is
// compared as if it were named so.
func (c *Checkpoint) differences(was *Checkpoint) []string {
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

// describe is the checkpoint in one line of Markdown: where it came from
// (the model's folder or hub id, then the tokenizer's when elsewhere) and
// its files' digests (shortened; manifest.json has them whole).
func (c *Checkpoint) describe() string {
	var b strings.Builder
	b.WriteString(describeOrigin(c.Dir, c.HubID, c.Revision))
	if t := c.Tokenizer; t != nil {
		fmt.Fprintf(&b, ", the %s files from %s", mdCode(TokenizerPrefix), describeOrigin(t.Dir, t.HubID, t.Revision))
	}
	b.WriteString(" (")
	for i, f := range c.Files {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s SHA-256 %s…", mdCode(f.Name), f.SHA256[:min(len(f.SHA256), 16)])
	}
	b.WriteString(")")
	return b.String()
}

// describeOrigin is a folder in Markdown: its hub id and commit when it is
// a hub cache's snapshot, else its path.
func describeOrigin(dir, hubID, revision string) string {
	if hubID != "" {
		return fmt.Sprintf("%s at commit %s", mdCode(hubID), mdCode(revision))
	}
	return mdCode(dir)
}

// from says where c's files were read, for an error.
func (c *Checkpoint) from() string {
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
func checkCheckpoint(root string, ck *Checkpoint) error {
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
	if diffs := ck.differences(was); len(diffs) > 0 {
		return fmt.Errorf("%w: the embedded target loaded other files than the runs in %s measured (%s; now from %s); resuming would mix two models: restore them, or measure afresh with a new name or --output-root",
			ErrRefused, root, strings.Join(diffs, "; "), ck.from())
	}
	return nil
}
