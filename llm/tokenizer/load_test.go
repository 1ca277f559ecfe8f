package tokenizer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// copyTiny writes the tiny tokenizer.json (and its config) into dir.
func copyTiny(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", "tiny", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "tokenizer.json")
}

func TestLocate(t *testing.T) {
	root := t.TempDir()
	model := filepath.Join(root, "model")
	modelFile := copyTiny(t, model)
	emptyDir := filepath.Join(root, "empty")
	if err := os.Mkdir(emptyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	tokDir := filepath.Join(root, "toks")
	inTokDir := copyTiny(t, filepath.Join(tokDir, "Org", "InDir"))
	inTokDirCache := copyTiny(t, filepath.Join(tokDir, "models--Org--CacheInDir", "snapshots", "s1"))

	// A hub cache with two snapshots: refs/main picks the second.
	hub := filepath.Join(root, "hub")
	copyTiny(t, filepath.Join(hub, "models--Qwen--Q", "snapshots", "aaa"))
	mainSnap := copyTiny(t, filepath.Join(hub, "models--Qwen--Q", "snapshots", "bbb"))
	if err := os.MkdirAll(filepath.Join(hub, "models--Qwen--Q", "refs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hub, "models--Qwen--Q", "refs", "main"), []byte("bbb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Without refs/main the first snapshot in name order is used.
	noRef := copyTiny(t, filepath.Join(hub, "models--Org--NoRef", "snapshots", "a1"))
	copyTiny(t, filepath.Join(hub, "models--Org--NoRef", "snapshots", "b2"))
	// HF_HOME and ~/.cache layouts.
	hfHome := filepath.Join(root, "hfhome")
	viaHome := copyTiny(t, filepath.Join(hfHome, "hub", "models--Org--H", "snapshots", "x"))
	home := filepath.Join(root, "home")
	viaUser := copyTiny(t, filepath.Join(home, ".cache", "huggingface", "hub", "models--legacy", "snapshots", "x"))
	xdg := filepath.Join(root, "xdg")
	viaXDG := copyTiny(t, filepath.Join(xdg, "huggingface", "hub", "models--Org--X", "snapshots", "x"))

	// A folder named like an id, without tokenizer.json, in the working
	// directory: the lookup must go on to the caches.
	t.Chdir(root)
	if err := os.MkdirAll(filepath.Join(root, "Org", "H"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		spec     string
		opts     LoadOptions
		want     string
		builtin  bool
		notFound bool
	}{
		{"builtin", "gpt2", LoadOptions{}, "", true, false},
		{"builtin alias", "openai-community/gpt2", LoadOptions{}, "", true, false},
		{"file", modelFile, LoadOptions{}, modelFile, false, false},
		{"model dir", model, LoadOptions{}, modelFile, false, false},
		{"dir without tokenizer.json", emptyDir, LoadOptions{}, "", false, true},
		{"tokenizer dir", "Org/InDir", LoadOptions{TokenizerDir: tokDir}, inTokDir, false, false},
		{"tokenizer dir as cache", "Org/CacheInDir", LoadOptions{TokenizerDir: tokDir}, inTokDirCache, false, false},
		{"hub cache refs/main", "Qwen/Q", LoadOptions{HFHubCache: hub, HFHome: hfHome}, mainSnap, false, false},
		{"hub cache no ref", "Org/NoRef", LoadOptions{HFHubCache: hub}, noRef, false, false},
		{"hf home", "Org/H", LoadOptions{HFHome: hfHome, Home: home}, viaHome, false, false},
		{"xdg", "Org/X", LoadOptions{XDGCacheHome: xdg, Home: home}, viaXDG, false, false},
		{"user cache, id without org", "legacy", LoadOptions{Home: home}, viaUser, false, false},
		{"hub cache wins over home", "legacy", LoadOptions{HFHubCache: hub, Home: home}, "", false, true},
		{"id shadowed by an empty folder", "Org/H", LoadOptions{HFHome: hfHome}, viaHome, false, false},
		{"missing id", "Org/Missing", LoadOptions{HFHubCache: hub, TokenizerDir: tokDir}, "", false, true},
		{"missing path", filepath.Join(root, "nope", "tokenizer.json"), LoadOptions{HFHubCache: hub}, "", false, true},
		{"no options", "Org/H", LoadOptions{}, "", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, builtin, err := Locate(tc.spec, tc.opts)
			var nf *NotFoundError
			if tc.notFound {
				if !errors.As(err, &nf) {
					t.Fatalf("err = %v, want *NotFoundError", err)
				}
				if len(nf.Looked) == 0 || !strings.Contains(err.Error(), "looked in") {
					t.Fatalf("error does not say where it looked: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || builtin != tc.builtin {
				t.Fatalf("Locate = %q, %v; want %q, %v", got, builtin, tc.want, tc.builtin)
			}
		})
	}
}

// TestLocateRevision: with LoadOptions.Revision only hub cache layouts are
// searched, at that revision (the built-in gpt2 names included); paths
// refuse a revision; a revision the cache lacks is a *NotFoundError that
// lists what the cache holds.
func TestLocateRevision(t *testing.T) {
	root := t.TempDir()
	hub := filepath.Join(root, "hub")
	tokDir := filepath.Join(root, "toks")
	v1 := copyTiny(t, filepath.Join(hub, "models--openai-community--gpt2", "snapshots", "c1"))
	v2 := copyTiny(t, filepath.Join(hub, "models--openai-community--gpt2", "snapshots", "c2"))
	inDir := copyTiny(t, filepath.Join(tokDir, "models--Org--T", "snapshots", "c9"))
	for path, ref := range map[string]string{
		filepath.Join(hub, "models--openai-community--gpt2", "refs", "main"): "c1",
		filepath.Join(hub, "models--openai-community--gpt2", "refs", "v2"):   "c2",
		filepath.Join(tokDir, "models--Org--T", "refs", "stable"):            "c9",
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(ref), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	opts := LoadOptions{HFHubCache: hub, TokenizerDir: tokDir}
	for _, c := range []struct{ spec, rev, want string }{
		{"openai-community/gpt2", "main", v1},
		{"openai-community/gpt2", "v2", v2},
		{"openai-community/gpt2", "c2", v2},
		{"Org/T", "stable", inDir},
	} {
		o := opts
		o.Revision = c.rev
		got, builtin, err := Locate(c.spec, o)
		if err != nil || builtin || got != c.want {
			t.Errorf("%s at %s: %q, %v, %v; want %q", c.spec, c.rev, got, builtin, err, c.want)
		}
	}
	o := opts
	o.Revision = "dev"
	_, _, err := Locate("openai-community/gpt2", o)
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("a revision not in the cache: %v, want *NotFoundError", err)
	}
	for _, w := range []string{`at revision "dev"`, "main -> c1", "v2 -> c2", "hf download openai-community/gpt2 --revision dev"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
	o.Revision = "main"
	if _, _, err := Locate(v1, o); err == nil || !strings.Contains(err.Error(), "is a path") {
		t.Errorf("a path at a revision: %v", err)
	}
	// A revision that cannot name one is refused as such, not looked up
	// (with an hf download command to run), held by the cache or not.
	for _, spec := range []string{"openai-community/gpt2", "Org/Absent"} {
		o.Revision = "../x"
		_, _, err := Locate(spec, o)
		if err == nil || errors.As(err, &nf) || !strings.Contains(err.Error(), `tokenizer revision "../x": want a branch, tag or commit hash`) {
			t.Errorf("%s at ../x: %v", spec, err)
		}
	}
}

func TestNotFoundMessage(t *testing.T) {
	hub := t.TempDir()
	tokDir := t.TempDir()
	_, err := Load("Qwen/Qwen2.5-0.5B-Instruct", LoadOptions{HFHubCache: hub, TokenizerDir: tokDir})
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{
		filepath.Join(hub, "models--Qwen--Qwen2.5-0.5B-Instruct", "snapshots", "*", "tokenizer.json"),
		filepath.Join(tokDir, "Qwen", "Qwen2.5-0.5B-Instruct", "tokenizer.json"),
		"hf download Qwen/Qwen2.5-0.5B-Instruct tokenizer.json tokenizer_config.json",
		"--tokenizer-dir",
		"nothing is downloaded",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not mention %q:\n%s", want, msg)
		}
	}
}

func TestLoad(t *testing.T) {
	g, err := Load("gpt2", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := g.(*GPT2Tokenizer); !ok {
		t.Fatalf("Load(gpt2) = %T", g)
	}
	tok, err := Load(filepath.Join("testdata", "tiny"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Decode(tok.Encode("hello world", false), false); got != "hello world" {
		t.Fatalf("round trip = %q", got)
	}
	if got := tok.EOSTokenID(); got != 268 {
		t.Fatalf("EOS from tokenizer_config.json = %d, want 268", got)
	}
	// A broken file is an error naming the file, not a panic.
	bad := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(bad, []byte(`{"model": {"type": "Unigram"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad, LoadOptions{}); err == nil || !strings.Contains(err.Error(), bad) || !errors.Is(err, ErrUnsupported) {
		t.Fatalf("err = %v", err)
	}
}

func TestLoadOptionsFromEnv(t *testing.T) {
	env := map[string]string{
		"HUGGINGFACE_HUB_CACHE": "/legacy",
		"HF_HOME":               "/hfhome",
		"XDG_CACHE_HOME":        "/xdg",
		"HOME":                  "/home/u",
	}
	o := LoadOptionsFromEnv(func(k string) string { return env[k] }, "/toks")
	want := LoadOptions{TokenizerDir: "/toks", HFHubCache: "/legacy", HFHome: "/hfhome", XDGCacheHome: "/xdg", Home: "/home/u"}
	if o != want {
		t.Fatalf("got %+v, want %+v", o, want)
	}
	env["HF_HUB_CACHE"] = "/hub"
	if o := LoadOptionsFromEnv(func(k string) string { return env[k] }, ""); o.HFHubCache != "/hub" {
		t.Fatalf("HF_HUB_CACHE not preferred: %+v", o)
	}
	if got := (LoadOptions{HFHome: "/h", Home: "/u"}).hubCache(); got != filepath.Join("/h", "hub") {
		t.Fatalf("hubCache = %q", got)
	}
	// ~ and $VAR are expanded, as huggingface_hub expands them.
	env = map[string]string{"HF_HOME": "~/hf", "XDG_CACHE_HOME": "$SCRATCH/c", "SCRATCH": "/s", "HOME": "/home/u"}
	o = LoadOptionsFromEnv(func(k string) string { return env[k] }, "")
	if o.HFHome != "/home/u/hf" || o.XDGCacheHome != "/s/c" || o.hubCache() != filepath.Join("/home/u/hf", "hub") {
		t.Fatalf("not expanded: %+v, hubCache %q", o, o.hubCache())
	}
}
