package tokenizer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tinyserve/tinyserve/internal/hfhub"
	"github.com/tinyserve/tinyserve/llm"
)

// BuiltinGPT2 is the tokenizer spec that selects the built-in GPT-2 BPE.
const BuiltinGPT2 = "gpt2"

// IsBuiltin reports whether spec names a built-in tokenizer, which needs no
// file: "gpt2" or a Hugging Face id whose tokenizer is exactly GPT-2's
// (unless LoadOptions.Revision asks for a cached one), or "qwen2.5"
// ([BuiltinQwen]). No Qwen id is taken for the built-in Qwen tokenizer, its
// files differing from each Qwen model's own in a few added tokens or the
// chat template.
func IsBuiltin(spec string) bool {
	return spec == BuiltinGPT2 || spec == "openai-community/gpt2" || spec == BuiltinQwen
}

// LoadOptions tell Load where to look for Hugging Face ids. They are plain
// values rather than environment lookups inside Load, so that tests and
// embedding programs decide what is searched; [LoadOptionsFromEnv] fills them
// the usual way.
type LoadOptions struct {
	// Revision, when set, is the branch, tag or commit hash of a Hugging
	// Face id to load (vLLM's --tokenizer-revision): only hub cache layouts
	// are searched (see hfhub.SnapshotAt). A path, or the built-in
	// "qwen2.5", is an error, having no revisions; "gpt2" and
	// "openai-community/gpt2" then name GPT-2's repository and are looked
	// up in the cache like any id.
	Revision string
	// TokenizerDir is an extra folder searched first for ids, as
	// DIR/ORG/NAME/tokenizer.json or as a Hugging Face cache layout
	// (DIR/models--ORG--NAME/snapshots/*/tokenizer.json). Empty: none.
	TokenizerDir string
	// HFHubCache is $HF_HUB_CACHE: the hub cache folder itself.
	HFHubCache string
	// HFHome is $HF_HOME; its hub/ subfolder is the cache when HFHubCache is
	// empty.
	HFHome string
	// XDGCacheHome is $XDG_CACHE_HOME; huggingface/hub under it is the cache
	// when both of the above are empty.
	XDGCacheHome string
	// Home is the user's home folder; ~/.cache/huggingface/hub is the last
	// resort.
	Home string
}

// LoadOptionsFromEnv builds LoadOptions from environment variables read with
// getenv (normally os.Getenv), the way huggingface_hub resolves its cache.
// tokenizerDir is the --tokenizer-dir flag. A leading ~ and $VAR in the
// cache variables are expanded, as huggingface_hub expands them (see
// hfhub.ExpandPath).
func LoadOptionsFromEnv(getenv func(string) string, tokenizerDir string) LoadOptions {
	hub := getenv("HF_HUB_CACHE")
	if hub == "" {
		hub = getenv("HUGGINGFACE_HUB_CACHE") // the older name, still honoured by huggingface_hub
	}
	home := getenv("HOME")
	if home == "" {
		home = getenv("USERPROFILE")
	}
	expand := func(p string) string { return hfhub.ExpandPath(p, getenv) }
	return LoadOptions{
		TokenizerDir: tokenizerDir,
		HFHubCache:   expand(hub),
		HFHome:       expand(getenv("HF_HOME")),
		XDGCacheHome: expand(getenv("XDG_CACHE_HOME")),
		Home:         home,
	}
}

// hubCache returns the Hugging Face hub cache folder the options point at,
// or "" when they point nowhere.
func (o LoadOptions) hubCache() string {
	return hfhub.CacheDir(func(name string) string {
		switch name {
		case "HF_HUB_CACHE":
			return o.HFHubCache
		case "HF_HOME":
			return o.HFHome
		case "XDG_CACHE_HOME":
			return o.XDGCacheHome
		case "HOME":
			return o.Home
		}
		return ""
	})
}

// NotFoundError says that a tokenizer could not be found, where Load looked
// and how to provide it.
type NotFoundError struct {
	Spec     string   // what the caller asked for
	Revision string   // the revision asked for, if any
	Looked   []string // paths and patterns that were checked, in order
	// RevisionErrors say, for each cached repository that lacks Revision,
	// which revisions it holds.
	RevisionErrors []string
}

// Error lists the places searched and the ways to provide the file.
func (e *NotFoundError) Error() string {
	var b strings.Builder
	if e.Revision != "" {
		fmt.Fprintf(&b, "tokenizer %q at revision %q not found (nothing is downloaded); looked in:", e.Spec, e.Revision)
	} else {
		fmt.Fprintf(&b, "tokenizer %q not found (nothing is downloaded); looked in:", e.Spec)
	}
	for _, l := range e.Looked {
		b.WriteString("\n  ")
		b.WriteString(l)
	}
	for _, r := range e.RevisionErrors {
		b.WriteString("\n" + r)
	}
	if e.Revision != "" {
		fmt.Fprintf(&b, "\nfetch it into the Hugging Face cache once with: %s (huggingface_hub before 0.34: huggingface-cli download, same arguments)",
			hfhub.DownloadCommand(e.Spec, "--revision", e.Revision, "tokenizer.json", "tokenizer_config.json"))
		return b.String()
	}
	b.WriteString("\nprovide it by passing the path of a tokenizer.json or of a model folder that has one")
	if hfhub.IsRepoID(e.Spec) {
		fmt.Fprintf(&b, ", by putting it at <tokenizer-dir>/%s/tokenizer.json and passing --tokenizer-dir,", e.Spec)
		fmt.Fprintf(&b, " or by fetching it into the Hugging Face cache once: %s (huggingface_hub before 0.34: huggingface-cli download, same arguments)",
			hfhub.DownloadCommand(e.Spec, "tokenizer.json", "tokenizer_config.json"))
	}
	b.WriteString(`; "gpt2" and "qwen2.5" are built in`)
	return b.String()
}

// Locate finds the tokenizer.json that spec names without loading it. spec
// is "gpt2" or "qwen2.5" (built in: builtin is true and path empty), a path to a
// tokenizer.json, a model folder containing one (or, lacking it, a slow
// tokenizer's vocab.json and merges.txt: path is then the vocab.json), or a
// Hugging Face id such as
// Qwen/Qwen2.5-0.5B-Instruct, looked up under opts.TokenizerDir and in the
// local hub cache. A relative path is relative to the working directory. When
// nothing is found the error is a *NotFoundError.
func Locate(spec string, opts LoadOptions) (path string, builtin bool, err error) {
	if spec == "" {
		return "", false, errors.New("tokenizer: empty name")
	}
	if opts.Revision != "" {
		if spec == BuiltinQwen {
			// Not a Hugging Face id: no cache holds revisions of it.
			return "", false, fmt.Errorf("tokenizer revision %q: the built-in tokenizer %q has no revisions; name the model's Hugging Face id (such as Qwen/Qwen2.5-0.5B-Instruct) instead", opts.Revision, spec)
		}
		return locateRevision(spec, opts)
	}
	if IsBuiltin(spec) {
		return "", true, nil
	}
	nf := &NotFoundError{Spec: spec}
	if fi, err := os.Stat(spec); err == nil {
		if !fi.IsDir() {
			return spec, false, nil
		}
		p := filepath.Join(spec, "tokenizer.json")
		if isFile(p) {
			return p, false, nil
		}
		if hasVocabMerges(spec) {
			return filepath.Join(spec, "vocab.json"), false, nil
		}
		nf.Looked = append(nf.Looked, p, filepath.Join(spec, "vocab.json")+" + merges.txt")
	} else {
		nf.Looked = append(nf.Looked, spec+" (no such file or folder)")
	}
	// A folder that happens to share an id's name (and lacks the file) does
	// not stop the lookup of the id.
	if !hfhub.IsRepoID(spec) {
		return "", false, nf
	}
	if opts.TokenizerDir != "" {
		p := filepath.Join(opts.TokenizerDir, filepath.FromSlash(spec), "tokenizer.json")
		if isFile(p) {
			return p, false, nil
		}
		if d := filepath.Dir(p); hasVocabMerges(d) {
			return filepath.Join(d, "vocab.json"), false, nil
		}
		nf.Looked = append(nf.Looked, p+" (or vocab.json + merges.txt)")
		repo := hfhub.RepoDir(opts.TokenizerDir, spec)
		if p, ok := inHubCache(repo); ok {
			return p, false, nil
		}
		nf.Looked = append(nf.Looked, filepath.Join(repo, "snapshots", "*", "tokenizer.json")+" (or vocab.json + merges.txt)")
	}
	if hub := opts.hubCache(); hub != "" {
		repo := hfhub.RepoDir(hub, spec)
		if p, ok := inHubCache(repo); ok {
			return p, false, nil
		}
		nf.Looked = append(nf.Looked, filepath.Join(repo, "snapshots", "*", "tokenizer.json")+" (or vocab.json + merges.txt)")
	}
	return "", false, nf
}

// locateRevision is Locate with opts.Revision set: spec must be a
// Hugging Face id, found at that revision in a hub cache layout under
// opts.TokenizerDir or in the hub cache.
func locateRevision(spec string, opts LoadOptions) (string, bool, error) {
	if _, err := os.Stat(spec); err == nil || !hfhub.IsRepoID(spec) {
		// A path has no revisions; one that also reads as an id is taken
		// as the path, as everywhere else.
		return "", false, fmt.Errorf("tokenizer revision %q applies to a tokenizer named by its Hugging Face id, and %q is a path", opts.Revision, spec)
	}
	if err := hfhub.CheckRevision(opts.Revision); err != nil {
		return "", false, fmt.Errorf("tokenizer %w", err)
	}
	nf := &NotFoundError{Spec: spec, Revision: opts.Revision}
	for _, root := range []string{opts.TokenizerDir, opts.hubCache()} {
		if root == "" {
			continue
		}
		repo := hfhub.RepoDir(root, spec)
		d, err := hfhub.SnapshotAt(repo, opts.Revision)
		if err != nil {
			nf.Looked = append(nf.Looked, filepath.Join(repo, "snapshots")+" (revision "+opts.Revision+")")
			if _, serr := os.Stat(repo); serr == nil {
				nf.RevisionErrors = append(nf.RevisionErrors, err.Error())
			}
			continue
		}
		if p := filepath.Join(d, "tokenizer.json"); isFile(p) {
			return p, false, nil
		}
		if hasVocabMerges(d) {
			return filepath.Join(d, "vocab.json"), false, nil
		}
		nf.Looked = append(nf.Looked, filepath.Join(d, "tokenizer.json")+" (or vocab.json + merges.txt)")
	}
	return "", false, nf
}

// inHubCache finds tokenizer.json, or lacking it vocab.json with
// merges.txt, in one repository folder of a Hugging Face hub cache (see
// hfhub.Snapshot for which snapshot).
func inHubCache(repoDir string) (string, bool) {
	d, ok := hfhub.Snapshot(repoDir, func(d string) bool { return isFile(filepath.Join(d, "tokenizer.json")) || hasVocabMerges(d) })
	if !ok {
		return "", false
	}
	if isFile(filepath.Join(d, "tokenizer.json")) {
		return filepath.Join(d, "tokenizer.json"), true
	}
	return filepath.Join(d, "vocab.json"), true
}

func isFile(p string) bool { return hfhub.IsFile(p) }

// Load returns the tokenizer spec names (see [Locate] for what spec may be):
// the built-in GPT-2 BPE for "gpt2", the built-in Qwen tokenizer ([Qwen])
// for "qwen2.5", otherwise the Hugging Face tokenizer.json
// found, with the end-of-sequence token from a tokenizer_config.json beside
// it, or the vocab.json and merges.txt found (see [LoadVocabMerges]). It
// reads only local files.
func Load(spec string, opts LoadOptions) (llm.Tokenizer, error) {
	tok, _, err := LoadWithFiles(spec, opts)
	return tok, err
}

// LoadWithFiles is Load that also returns the paths of the files it read,
// so that a benchmark can record them by content; none for the built-in
// tokenizers.
func LoadWithFiles(spec string, opts LoadOptions) (llm.Tokenizer, []string, error) {
	path, builtin, err := Locate(spec, opts)
	if err != nil {
		return nil, nil, err
	}
	if builtin {
		// Returned through explicit nils: a nil *HFTokenizer in the
		// llm.Tokenizer result would not compare equal to nil.
		var tok llm.Tokenizer
		if spec == BuiltinQwen {
			tok, err = Qwen()
		} else {
			tok, err = GPT2()
		}
		if err != nil {
			return nil, nil, err
		}
		return tok, nil, nil
	}
	var tok llm.Tokenizer
	var names []string
	dir := filepath.Dir(path)
	if filepath.Base(path) == "vocab.json" && hasVocabMerges(dir) {
		tok, err = LoadVocabMerges(dir)
		names = []string{"vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json"}
	} else {
		tok, err = LoadHF(path)
		names = []string{filepath.Base(path), "tokenizer_config.json"}
	}
	if err != nil {
		return nil, nil, err
	}
	var files []string
	for _, n := range names { // the optional ones only where they are
		if p := filepath.Join(dir, n); isFile(p) {
			files = append(files, p)
		}
	}
	return tok, files, nil
}
