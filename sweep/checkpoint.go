package sweep

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Checkpoint identifies by content the model files an embedded target
// loaded. A config names a model by path or Hugging Face id, and the files
// behind a name can change between invocations (a new `hf download` moves
// refs/main, a folder is rewritten), so the manifest records what was
// read, and a resumed sweep that finds other files refuses to mix them.
type Checkpoint struct {
	// Dir is the folder the files were read from.
	Dir string `json:"dir"`
	// HubID and Revision name the Hugging Face repository and the
	// snapshot's commit when Dir is in the local hub cache.
	HubID    string `json:"hub_id,omitempty"`
	Revision string `json:"revision,omitempty"`
	// Files are the files read: the model's (config.json,
	// generation_config.json, the weights and their index), then the
	// tokenizer's (tokenizer.json, or vocab.json and merges.txt, and the
	// configs beside them).
	Files []CheckpointFile `json:"files"`
}

// CheckpointFile is one file of a Checkpoint.
type CheckpointFile struct {
	Name   string `json:"name"` // relative to Checkpoint.Dir, or absolute when outside it
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
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
// content; where the folder is does not matter), or nil when they agree.
func (c *Checkpoint) differences(was *Checkpoint) []string {
	old := map[string]string{}
	for _, f := range was.Files {
		old[f.Name] = f.SHA256
	}
	var diffs []string
	for _, f := range c.Files {
		switch sum, ok := old[f.Name]; {
		case !ok:
			diffs = append(diffs, f.Name+" is new")
		case sum != f.SHA256:
			diffs = append(diffs, fmt.Sprintf("%s has SHA-256 %s, was %s", f.Name, f.SHA256, sum))
		}
		delete(old, f.Name)
	}
	for _, f := range was.Files {
		if _, gone := old[f.Name]; gone {
			diffs = append(diffs, f.Name+" is gone")
		}
	}
	return diffs
}

// describe is the checkpoint in one line of Markdown: where it came from
// and its files' digests (shortened; manifest.json has them whole).
func (c *Checkpoint) describe() string {
	var b strings.Builder
	if c.HubID != "" {
		fmt.Fprintf(&b, "%s at commit %s", mdCode(c.HubID), mdCode(c.Revision))
	} else {
		b.WriteString(mdCode(c.Dir))
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
			ErrRefused, filepath.Join(root, ManifestFile))
	}
	if diffs := ck.differences(was); len(diffs) > 0 {
		return fmt.Errorf("%w: the embedded target loaded other files than the runs in %s measured (%s; now from %s); resuming would mix two models: restore them, or measure afresh with a new name or --output-root",
			ErrRefused, root, strings.Join(diffs, "; "), ck.Dir)
	}
	return nil
}
