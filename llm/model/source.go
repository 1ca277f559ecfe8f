package model

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tinyserve/tinyserve/internal/hfhub"
	"github.com/tinyserve/tinyserve/llm/checkpoint"
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
	// OllamaLooked are the ollama manifests checked when the name is also
	// an ollama model name (see LocateOllama).
	OllamaLooked []string
}

// Error lists the places Locate looked and, for a hub id, the command that
// would put the model there.
func (e *NotFoundError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "model %q is neither a built-in model (%s) nor a checkpoint folder", e.Model, strings.Join(BuiltinNames(), ", "))
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
	if len(e.OllamaLooked) > 0 {
		b.WriteString("\nnor an ollama model in the local store (nothing is pulled); looked in:")
		for _, l := range e.OllamaLooked {
			b.WriteString("\n  " + l)
		}
	}
	if hfhub.IsRepoID(e.Model) {
		// The files this load format reads: pytorch_model.bin for pt,
		// no weights for dummy.
		files := []string{"config.json"}
		if e.LoadFormat != LoadDummy {
			files = append(files, checkpoint.WeightFiles(e.LoadFormat)[0])
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
	dir, _, err := locate(model, "", LoadAuto, getenv)
	return dir, err
}

// LocateAt is Locate at a revision of a Hugging Face id (vLLM's
// --revision): a branch, tag or commit hash the local cache holds (see
// hfhub.SnapshotAt), whose snapshot must have config.json and weights.
// An empty revision is Locate's choice. A revision for a folder is an
// error: a folder has no revisions.
func LocateAt(model, revision string, getenv func(string) string) (string, error) {
	dir, _, err := locate(model, revision, LoadAuto, getenv)
	return dir, err
}

// hubRef says where in the hub cache a model was found.
type hubRef struct {
	id     string // the repository id whose folder held it (an alias of the id asked for)
	commit string // the snapshot's commit hash
}

// locate finds model's folder; a hub snapshot must hold config.json and
// the weights format reads (only config.json for the dummy load format).
func locate(model, revision, format string, getenv func(string) string) (string, *hubRef, error) {
	if format == "" {
		format = LoadAuto
	}
	complete := func(dir string) bool { return hasCheckpoint(dir, format) }
	// what names the files looked for, as a folder's error does.
	what := "config.json"
	if format != LoadDummy {
		what += " and one of " + strings.Join(checkpoint.WeightFiles(format), ", ")
	}
	if _, err := os.Stat(model); !errors.Is(err, fs.ErrNotExist) {
		if revision != "" {
			return "", nil, fmt.Errorf("model: revision %q applies to a model named by its Hugging Face id, and %q is a folder", revision, model)
		}
		return model, nil, nil // a folder (Load reports what is wrong with it), or unreadable
	}
	if revision != "" {
		// Not a lookup that failed: no cache can hold it, and `hf download
		// --revision` would refuse it too.
		if err := hfhub.CheckRevision(revision); err != nil {
			return "", nil, fmt.Errorf("model: %w", err)
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

// hasCheckpoint reports whether dir holds config.json and the weights
// format reads (only config.json for the dummy format). A hub snapshot may
// hold only some files of its repository (the tokenizer's, say).
func hasCheckpoint(dir, format string) bool {
	if !hfhub.IsFile(filepath.Join(dir, "config.json")) {
		return false
	}
	return format == LoadDummy || checkpoint.HasWeights(dir, format)
}

// Source is where a model comes from, resolved once from what --model
// names, so that the weights and the tokenizer are read from the same
// place: a built-in model, a checkpoint folder, or a snapshot of the local
// Hugging Face cache.
type Source struct {
	// Name is the model's id: what was asked for (a built-in name, a hub
	// id), or a folder's base name.
	Name string
	// Builtin is the built-in model's name; empty for a folder.
	Builtin string
	// Dir is the checkpoint folder; empty for a built-in model.
	Dir string
	// GGUF is the GGUF file the model is read from (a path given, the one
	// .gguf of a folder, an ollama blob); Dir is then empty.
	GGUF string
	// HubID and Revision say where in the local Hugging Face cache Dir was
	// found: the repository id whose folder held it and the snapshot's
	// commit hash. Both are empty for a folder named by its path.
	HubID, Revision string
	// Tokenizer is the model's own tokenizer: a built-in tokenizer's name
	// (gpt2, qwen2.5) for a built-in model, else the path of the folder's
	// tokenizer.json (or, lacking one, its vocab.json beside a
	// merges.txt); empty when the folder has neither.
	Tokenizer string
}

// ResolveOptions are Resolve's settings beyond the model's name.
type ResolveOptions struct {
	// Revision is the branch, tag or commit hash of a Hugging Face id
	// (vLLM's --revision); empty means the snapshot refs/main names.
	Revision string
	// LoadFormat is vLLM's --load-format: it decides which weight files a
	// hub snapshot must hold. Empty means LoadAuto.
	LoadFormat string
	// Getenv reads the environment (the hub cache's location); nil means
	// os.Getenv.
	Getenv func(string) string
}

// Resolve finds what a --model value names: a built-in model by name,
// otherwise the checkpoint folder at that path, otherwise a Hugging Face id
// found in the local hub cache (see Locate; nothing is ever downloaded).
// A folder that happens to be called like a built-in model can be named
// as "./tiny-gpt2". When nothing is found the error is a *NotFoundError.
func Resolve(name string, o ResolveOptions) (Source, error) {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if err := checkLoadFormat(o.LoadFormat); err != nil {
		return Source{}, err
	}
	if b, ok := builtins[name]; ok {
		if o.Revision != "" {
			return Source{}, fmt.Errorf("model: revision %q applies to a model named by its Hugging Face id, and %s is built in", o.Revision, name)
		}
		if f := o.LoadFormat; f != "" && f != LoadAuto && f != LoadDummy {
			return Source{}, fmt.Errorf("model: load format %q reads weight files, and %s is built in (its weights are generated)", f, name)
		}
		return Source{Name: name, Builtin: name, Tokenizer: b.tokenizer}, nil
	}
	if src, ok, err := resolveGGUF(name, o); ok || err != nil {
		return src, err
	}
	dir, hub, err := locate(name, o.Revision, o.LoadFormat, o.Getenv)
	if err != nil {
		var nf *NotFoundError
		if errors.As(err, &nf) && o.Revision == "" {
			blob, looked, oerr := locateOllama(name, o.Getenv)
			if oerr != nil {
				return Source{}, oerr
			}
			if blob != "" {
				return Source{Name: name, Dir: filepath.Dir(blob), GGUF: blob, Tokenizer: blob}, nil
			}
			nf.OllamaLooked = looked
		}
		return Source{}, err
	}
	src := Source{Name: folderName(dir), Dir: dir, Tokenizer: folderTokenizer(dir)}
	if hub != nil {
		src.Name = name // served as the id asked for, not as the snapshot's revision hash
		src.HubID, src.Revision = hub.id, hub.commit
	}
	return src, nil
}

// folderTokenizer is the tokenizer file of a checkpoint folder: its
// tokenizer.json, else the vocab.json of a slow tokenizer with its
// merges.txt, else "".
func folderTokenizer(dir string) string {
	if p := filepath.Join(dir, "tokenizer.json"); hfhub.IsFile(p) {
		return p
	}
	if hfhub.IsFile(filepath.Join(dir, "vocab.json")) && hfhub.IsFile(filepath.Join(dir, "merges.txt")) {
		return filepath.Join(dir, "vocab.json")
	}
	return ""
}

// resolveGGUF is the Source of a GGUF file named by its path, or of a
// folder without config.json that holds exactly one .gguf file; ok is
// false when name is neither.
func resolveGGUF(name string, o ResolveOptions) (Source, bool, error) {
	path := ""
	if st, err := os.Stat(name); err == nil && st.IsDir() {
		p, err := ggufInFolder(name)
		if err != nil {
			return Source{}, false, err
		}
		path = p
	} else if err == nil && !st.IsDir() && IsGGUF(name) {
		path = name
	}
	if path == "" {
		return Source{}, false, nil
	}
	if o.Revision != "" {
		return Source{}, false, fmt.Errorf("model: revision %q applies to a model named by its Hugging Face id, and %q is a GGUF file", o.Revision, path)
	}
	if f := o.LoadFormat; f != "" && f != LoadAuto {
		return Source{}, false, fmt.Errorf("model: load format %q does not read GGUF files (%s): leave it auto", f, path)
	}
	return Source{Name: strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)), Dir: filepath.Dir(path), GGUF: path, Tokenizer: path}, true, nil
}

// Open loads the model src names: a built-in model is generated, a GGUF
// file read (LoadGGUF), a folder read in the given load format (see
// LoadFormat; "" is LoadAuto).
func Open(src Source, loadFormat string) (*Model, error) {
	if src.Builtin != "" {
		return Builtin(src.Builtin)
	}
	if src.GGUF != "" {
		if loadFormat != "" && loadFormat != LoadAuto {
			return nil, fmt.Errorf("model: load format %q does not read GGUF files (%s): leave it auto", loadFormat, src.GGUF)
		}
		m, err := LoadGGUF(src.GGUF)
		if err != nil {
			return nil, err
		}
		m.Name, m.Source = src.Name, src
		return m, nil
	}
	m, err := LoadFormat(src.Dir, loadFormat)
	if err != nil {
		return nil, err
	}
	m.Name = src.Name
	m.Source = src
	return m, nil
}

// OpenOptions are OpenWith's settings beyond the model's name.
type OpenOptions = ResolveOptions

// OpenWith resolves and opens the model a --model value names: Resolve,
// then Open.
func OpenWith(name string, o OpenOptions) (*Model, error) {
	src, err := Resolve(name, o)
	if err != nil {
		return nil, err
	}
	return Open(src, o.LoadFormat)
}
