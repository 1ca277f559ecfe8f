package model

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLocateAtRevision: LocateAt resolves a branch or a full commit hash
// in the hub cache; a revision that cannot name one ("../x", ".") is
// refused as such, whether or not the cache holds the id, and not as a
// revision the cache lacks, with an `hf download --revision` to run.
func TestLocateAtRevision(t *testing.T) {
	const c1 = "1111111111111111111111111111111111111111"
	snap, getenv := fakeHub(t, c1, "config.json", "{}", "model.safetensors", "")
	for _, rev := range []string{"main", c1} {
		if got, err := LocateAt("org/m", rev, getenv); err != nil || got != snap {
			t.Errorf("org/m at %q: %q, %v; want %q", rev, got, err, snap)
		}
	}
	for _, model := range []string{"org/m", "org/absent"} {
		for _, rev := range []string{"../x", ".", "main/"} {
			_, err := LocateAt(model, rev, getenv)
			var nf *NotFoundError
			switch {
			case err == nil:
				t.Errorf("%s at %q: found", model, rev)
			case errors.As(err, &nf) || strings.Contains(err.Error(), "hf download"):
				t.Errorf("%s at %q: %v; want the revision refused, not looked up", model, rev, err)
			case !strings.Contains(err.Error(), "want a branch, tag or commit hash"):
				t.Errorf("%s at %q: %v; want it to say what a revision is", model, rev, err)
			}
		}
	}
}

// TestNotFoundNamesTheLoadFormatsFiles: a hub id whose snapshots lack the
// weights a load format reads is an error that names the files looked for,
// and its `hf download` command fetches those files (pytorch_model.bin for
// pt, no weights for dummy), so that running it fixes the error.
func TestNotFoundNamesTheLoadFormatsFiles(t *testing.T) {
	const c1 = "1111111111111111111111111111111111111111"
	// Only the tokenizer was fetched: no format finds config.json.
	_, getenv := fakeHub(t, c1, "tokenizer.json", "{}")
	for _, c := range []struct {
		format, looked, fetch string
	}{
		{LoadAuto, "config.json and one of model.safetensors, model.safetensors.index.json, pytorch_model.bin, pytorch_model.bin.index.json",
			"hf download org/m config.json model.safetensors tokenizer.json"},
		{LoadSafetensors, "config.json and one of model.safetensors, model.safetensors.index.json",
			"hf download org/m config.json model.safetensors tokenizer.json"},
		{LoadPT, "config.json and one of pytorch_model.bin, pytorch_model.bin.index.json",
			"hf download org/m config.json pytorch_model.bin tokenizer.json"},
		{LoadDummy, "config.json", "hf download org/m config.json tokenizer.json"},
	} {
		for _, rev := range []string{"", "main"} {
			_, err := OpenWith("org/m", OpenOptions{Revision: rev, LoadFormat: c.format, Getenv: getenv})
			var nf *NotFoundError
			if !errors.As(err, &nf) {
				t.Fatalf("%s at %q: %v; want a NotFoundError", c.format, rev, err)
			}
			fetch := c.fetch
			if rev != "" {
				fetch = strings.Replace(fetch, "org/m", "org/m --revision "+rev, 1)
			}
			looked := "(with " + c.looked + ")" // the snapshots/* line
			if rev != "" {
				looked = "(revision " + rev + ": no " + c.looked + ";"
			}
			if msg := err.Error(); !strings.Contains(msg, looked) || !strings.Contains(msg, fetch+" (") {
				t.Errorf("%s at %q: %s\nwant it to name %q and to say %q", c.format, rev, msg, looked, fetch)
			}
		}
	}
}

// fakeHub lays out a hub cache holding the repository org/m with one
// snapshot, commit, that refs/main names, holding the files of
// nameContents (a name, then its contents, ...). It returns the snapshot
// folder and an environment whose HF_HUB_CACHE is the cache.
func fakeHub(t *testing.T, commit string, nameContents ...string) (string, func(string) string) {
	t.Helper()
	hub := t.TempDir()
	repo := filepath.Join(hub, "models--org--m")
	snap := filepath.Join(repo, "snapshots", commit)
	files := map[string]string{filepath.Join(repo, "refs", "main"): commit + "\n"}
	for i := 0; i+1 < len(nameContents); i += 2 {
		files[filepath.Join(snap, nameContents[i])] = nameContents[i+1]
	}
	for p, data := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return snap, func(k string) string {
		if k == "HF_HUB_CACHE" {
			return hub
		}
		return ""
	}
}
