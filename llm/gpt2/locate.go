package gpt2

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tinyserve/tinyserve/internal/hfhub"
)

// NotFoundError says that a --model value is neither a built-in model, nor
// a checkpoint folder, nor in the local Hugging Face cache, where Locate
// looked, and how to provide it. Nothing is ever downloaded.
type NotFoundError struct {
	Model    string // what was asked for
	Revision string // the revision asked for, if any
	// LoadFormat is the load format asked for (see LoadFormat; "" means
	// LoadAuto): it decides which weight file the download command names.
	LoadFormat string
	Looked     []string // folders and patterns checked, in order
	// RevisionErrors say, for each cached repository that lacks Revision,
	// which revisions it holds.
	RevisionErrors []string
}

// Error lists the places Locate looked and, for a hub id, the command that
// would put the model there.
func (e *NotFoundError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "gpt2: model %q is neither a built-in model (%s) nor a checkpoint folder", e.Model, strings.Join(BuiltinNames(), ", "))
	if len(e.Looked) > 1 {
		b.WriteString(", nor in the local Hugging Face cache (nothing is downloaded)")
		if e.Revision != "" {
			fmt.Fprintf(&b, " at revision %q", e.Revision)
		}
	}
	b.WriteString("; looked in:")
	for _, l := range e.Looked {
		b.WriteString("\n  " + l)
	}
	for _, r := range e.RevisionErrors {
		b.WriteString("\n" + r)
	}
	if hfhub.IsRepoID(e.Model) {
		// The files this load format reads: pytorch_model.bin for pt,
		// no weights for dummy.
		files := []string{"config.json"}
		if formats, err := weightFormatsFor(e.LoadFormat); err == nil && len(formats) > 0 {
			files = append(files, formats[0].single)
		}
		files = append(files, "tokenizer.json")
		if e.Revision != "" {
			files = append([]string{"--revision", e.Revision}, files...)
		}
		fmt.Fprintf(&b, "\nfetch it into the cache once with: %s (huggingface_hub before 0.34: huggingface-cli download, same arguments)",
			hfhub.DownloadCommand(e.Model, files...))
	}
	return b.String()
}

// hubAliases are the ids under which the hub cache may hold one model:
// GPT-2's repositories moved to openai-community/, and huggingface_hub
// names the cache folder after the id a program asked for.
var hubAliases = map[string][]string{
	"gpt2": {"gpt2", "openai-community/gpt2"}, "openai-community/gpt2": {"openai-community/gpt2", "gpt2"},
	"gpt2-medium": {"gpt2-medium", "openai-community/gpt2-medium"}, "openai-community/gpt2-medium": {"openai-community/gpt2-medium", "gpt2-medium"},
	"gpt2-large": {"gpt2-large", "openai-community/gpt2-large"}, "openai-community/gpt2-large": {"openai-community/gpt2-large", "gpt2-large"},
	"gpt2-xl": {"gpt2-xl", "openai-community/gpt2-xl"}, "openai-community/gpt2-xl": {"openai-community/gpt2-xl", "gpt2-xl"},
	"distilgpt2": {"distilgpt2", "distilbert/distilgpt2"}, "distilbert/distilgpt2": {"distilbert/distilgpt2", "distilgpt2"},
}

// Locate finds the checkpoint folder a --model value names (not a built-in
// model: see IsBuiltin): the path itself when it exists, else, for a
// Hugging Face id such as openai-community/gpt2, the snapshot of the local
// hub cache (hfhub.CacheDir(getenv)) that refs/main names, or else the
// first by name, that has config.json and weights. When nothing is found
// the error is a *NotFoundError.
func Locate(model string, getenv func(string) string) (string, error) {
	dir, _, err := locate(model, "", weightFormats, getenv)
	return dir, err
}

// LocateAt is Locate at a revision of a Hugging Face id (vLLM's
// --revision): a branch, tag or commit hash the local cache holds (see
// hfhub.SnapshotAt), whose snapshot must have config.json and weights.
// An empty revision is Locate's choice. A revision for a folder is an
// error: a folder has no revisions.
func LocateAt(model, revision string, getenv func(string) string) (string, error) {
	dir, _, err := locate(model, revision, weightFormats, getenv)
	return dir, err
}

// hubRef says where in the hub cache a model was found.
type hubRef struct {
	id     string // the repository id whose folder held it (an alias of the id asked for)
	commit string // the snapshot's commit hash
}

// locate finds model's folder; a hub snapshot must hold config.json and
// weights in one of formats (only config.json when formats is empty: the
// dummy load format).
func locate(model, revision string, formats []weightFormat, getenv func(string) string) (string, *hubRef, error) {
	complete := func(dir string) bool { return hasCheckpoint(dir, formats) }
	// what names the files looked for, as a folder's error does.
	what, format := "config.json", LoadDummy
	if len(formats) > 0 {
		var names []string
		for _, wf := range formats {
			names = append(names, wf.single, wf.index)
		}
		what += " and one of " + strings.Join(names, ", ")
		format = LoadAuto
		if len(formats) == 1 {
			format = formats[0].name
		}
	}
	if _, err := os.Stat(model); !errors.Is(err, fs.ErrNotExist) {
		if revision != "" {
			return "", nil, fmt.Errorf("gpt2: revision %q applies to a model named by its Hugging Face id, and %q is a folder", revision, model)
		}
		return model, nil, nil // a folder (Load reports what is wrong with it), or unreadable
	}
	if revision != "" {
		// Not a lookup that failed: no cache can hold it, and `hf download
		// --revision` would refuse it too.
		if err := hfhub.CheckRevision(revision); err != nil {
			return "", nil, fmt.Errorf("gpt2: %w", err)
		}
	}
	nf := &NotFoundError{Model: model, Revision: revision, LoadFormat: format, Looked: []string{model + " (no such folder)"}}
	cache := hfhub.CacheDir(getenv)
	if !hfhub.IsRepoID(model) || cache == "" {
		return "", nil, nf
	}
	ids := hubAliases[model]
	if ids == nil {
		ids = []string{model}
	}
	var revErrs []string
	for _, id := range ids {
		repo := hfhub.RepoDir(cache, id)
		if revision == "" {
			if dir, ok := hfhub.Snapshot(repo, complete); ok {
				return dir, &hubRef{id: id, commit: filepath.Base(dir)}, nil
			}
			nf.Looked = append(nf.Looked, filepath.Join(repo, "snapshots", "*")+" (with "+what+")")
			continue
		}
		dir, err := hfhub.SnapshotAt(repo, revision)
		switch {
		case err == nil && complete(dir):
			return dir, &hubRef{id: id, commit: filepath.Base(dir)}, nil
		case err == nil:
			nf.Looked = append(nf.Looked, dir+" (revision "+revision+": no "+what+"; only part of the repository was fetched)")
		default:
			if _, serr := os.Stat(repo); serr == nil {
				revErrs = append(revErrs, err.Error())
			}
			nf.Looked = append(nf.Looked, filepath.Join(repo, "snapshots")+" (revision "+revision+")")
		}
	}
	nf.RevisionErrors = revErrs
	return "", nil, nf
}

// hasCheckpoint reports whether dir holds config.json and weights in one of
// formats (only config.json for none). A hub snapshot may hold only some
// files of its repository (the tokenizer's, say).
func hasCheckpoint(dir string, formats []weightFormat) bool {
	if !hfhub.IsFile(filepath.Join(dir, "config.json")) {
		return false
	}
	if len(formats) == 0 {
		return true
	}
	for _, wf := range formats {
		if hfhub.IsFile(filepath.Join(dir, wf.single)) || hfhub.IsFile(filepath.Join(dir, wf.index)) {
			return true
		}
	}
	return false
}
