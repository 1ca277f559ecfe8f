package hfhub

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestIsRepoID(t *testing.T) {
	tests := map[string]bool{
		"Qwen/Qwen2.5-0.5B-Instruct": true,
		"gpt2-medium":                true,
		"./model":                    false,
		"/abs/path":                  false,
		"a/b/c":                      false,
		"tokenizer.json":             false,
		"org/":                       false,
		"has space/x":                false,
		"org_1/m.v2":                 true,
		// Refused by the Hub: a path ("a/..", "a/.") or an id whose cache
		// folder reads back as another ("a--b" is models--a--b, a/b's).
		"a/..":   false,
		"a/.":    false,
		"a..b":   false,
		"a--b":   false,
		"a-/b":   false,
		"org/-m": false,
		"org./m": false,
		"org/m.": false,
		"--":     false,
		"_x/y_":  true,
	}
	for in, want := range tests {
		if got := IsRepoID(in); got != want {
			t.Errorf("IsRepoID(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestCacheDir(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"HF_HUB_CACHE": "/a", "HUGGINGFACE_HUB_CACHE": "/b", "HF_HOME": "/c", "HOME": "/h"}, "/a"},
		{map[string]string{"HUGGINGFACE_HUB_CACHE": "/b", "HF_HOME": "/c"}, "/b"},
		{map[string]string{"HF_HOME": "/c", "XDG_CACHE_HOME": "/x"}, filepath.Join("/c", "hub")},
		{map[string]string{"XDG_CACHE_HOME": "/x", "HOME": "/h"}, filepath.Join("/x", "huggingface", "hub")},
		{map[string]string{"HOME": "/h"}, filepath.Join("/h", ".cache", "huggingface", "hub")},
		{map[string]string{"USERPROFILE": `C:\u`}, filepath.Join(`C:\u`, ".cache", "huggingface", "hub")},
		{map[string]string{}, ""},
		// Expanded as huggingface_hub expands them, where no shell did.
		{map[string]string{"HF_HOME": "~/hf", "HOME": "/h"}, filepath.Join("/h", "hf", "hub")},
		{map[string]string{"HF_HUB_CACHE": "$SCRATCH/hub", "SCRATCH": "/s"}, filepath.Join("/s", "hub")},
		{map[string]string{"HUGGINGFACE_HUB_CACHE": "~", "HOME": "/h"}, "/h"},
		{map[string]string{"XDG_CACHE_HOME": "${HOME}/c", "HOME": "/h"}, filepath.Join("/h", "c", "huggingface", "hub")},
	}
	for _, tt := range tests {
		if got := CacheDir(func(k string) string { return tt.env[k] }); got != tt.want {
			t.Errorf("CacheDir(%v) = %q, want %q", tt.env, got, tt.want)
		}
	}
}

func TestRepoDir(t *testing.T) {
	if got, want := RepoDir("/c", "openai-community/gpt2"), filepath.Join("/c", "models--openai-community--gpt2"); got != want {
		t.Errorf("RepoDir = %q, want %q", got, want)
	}
	if got, want := RepoDir("/c", "gpt2"), filepath.Join("/c", "models--gpt2"); got != want {
		t.Errorf("RepoDir = %q, want %q", got, want)
	}
}

// TestSnapshotOf reverses RepoDir and a snapshot's name, and takes no
// other folder for a snapshot.
func TestSnapshotOf(t *testing.T) {
	for _, c := range []struct{ dir, id, commit string }{
		{filepath.Join("/c", "models--openai-community--gpt2", "snapshots", "607a30d"), "openai-community/gpt2", "607a30d"},
		{filepath.Join("/c", "models--gpt2", "snapshots", "abc") + string(filepath.Separator), "gpt2", "abc"},
		{filepath.Join("/c", "models--org--m", "snapshots"), "", ""},
		{filepath.Join("/c", "org", "m"), "", ""},
		{filepath.Join("/c", "datasets--org--m", "snapshots", "abc"), "", ""},
		{filepath.Join("/c", "models--a--b--c", "snapshots", "abc"), "", ""},
		{filepath.Join("/c", "models--org--m", "other", "abc"), "", ""},
	} {
		id, commit, ok := SnapshotOf(c.dir)
		if id != c.id || commit != c.commit || ok != (c.id != "") {
			t.Errorf("SnapshotOf(%q) = %q, %q, %v; want %q, %q", c.dir, id, commit, ok, c.id, c.commit)
		}
	}
}

func TestSnapshot(t *testing.T) {
	repo := t.TempDir()
	mk := func(rev string, withFile bool) {
		d := filepath.Join(repo, "snapshots", rev)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if withFile {
			if err := os.WriteFile(filepath.Join(d, "f"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	has := func(d string) bool { return IsFile(filepath.Join(d, "f")) }
	snap := func(rev string) string { return filepath.Join(repo, "snapshots", rev) }
	if _, ok := Snapshot(repo, has); ok {
		t.Fatal("a snapshot found in an empty repository")
	}
	mk("ccc", true)
	mk("aaa", false) // first in name order, but without the file
	mk("bbb", true)
	if got, ok := Snapshot(repo, has); !ok || got != snap("bbb") {
		t.Errorf("without refs/main: %q %v, want the first with the file (bbb)", got, ok)
	}
	writeRef := func(rev string) {
		if err := os.MkdirAll(filepath.Join(repo, "refs"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, "refs", "main"), []byte(rev+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeRef("ccc")
	if got, ok := Snapshot(repo, has); !ok || got != snap("ccc") {
		t.Errorf("refs/main ccc: %q %v", got, ok)
	}
	writeRef("aaa") // names a snapshot without the file: fall back
	if got, ok := Snapshot(repo, has); !ok || got != snap("bbb") {
		t.Errorf("refs/main without the file: %q %v, want bbb", got, ok)
	}
	writeRef("../../x") // not a revision: ignored
	if got, ok := Snapshot(repo, func(d string) bool { return filepath.Base(d) != "x" && has(d) }); !ok || got != snap("bbb") {
		t.Errorf("refs/main outside snapshots: %q %v", got, ok)
	}
}

func TestExpandPath(t *testing.T) {
	env := map[string]string{"HOME": "/h", "A": "/a", "A_1": "x"}
	getenv := func(k string) string { return env[k] }
	for in, want := range map[string]string{
		"":              "",
		"/plain":        "/plain",
		"~":             "/h",
		"~/x":           "/h/x",
		"~x/y":          "~x/y", // another user's home: left as written
		"/x/~/y":        "/x/~/y",
		"$A/b":          "/a/b",
		"${A}b":         "/ab",
		"$A_1-$A":       "x-/a",
		"$UNSET/b":      "$UNSET/b",
		"${UNSET}/b":    "${UNSET}/b",
		"${}/b":         "${}/b",
		"${A/b}":        "${A/b}",
		"cost$":         "cost$",
		"$$A":           "$/a",
		"~/$A/${HOME}/": "/h//a//h/",
		// A reference to a variable not set is left whole, with any '$'
		// inside it, as expandvars leaves it.
		"${UNSET$A}": "${UNSET$A}",
		"${$A}":      "${$A}",
		"${A/$A}":    "${A/$A}",
		"${}$A":      "${}/a",
	} {
		if got := ExpandPath(in, getenv); got != want {
			t.Errorf("ExpandPath(%q) = %q, want %q", in, got, want)
		}
	}
	if got := ExpandPath("~/x", func(string) string { return "" }); got != "~/x" {
		t.Errorf("without a home folder: %q", got)
	}
}

func TestSnapshotAt(t *testing.T) {
	repo := t.TempDir()
	write := func(rel, content string) {
		p := filepath.Join(repo, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const c1, c2, c3 = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222", "3333333333333333333333333333333333333333"
	write("snapshots/"+c1+"/config.json", "{}")
	write("snapshots/"+c2+"/config.json", "{}")
	write("refs/main", c2+"\n")
	write("refs/v1.0", c1)
	write("refs/refs/pr/3", c1) // huggingface_hub keeps "refs/pr/3" at refs/refs/pr/3
	write("refs/gone", c3)      // a ref whose snapshot was deleted
	write("refs/dot", ".\n")    // would name the snapshots folder itself
	snap := func(c string) string { return filepath.Join(repo, "snapshots", c) }
	for rev, want := range map[string]string{"main": snap(c2), "v1.0": snap(c1), "refs/pr/3": snap(c1), c1: snap(c1), c2: snap(c2)} {
		if got, err := SnapshotAt(repo, rev); err != nil || got != want {
			t.Errorf("SnapshotAt(%q) = %q, %v; want %q", rev, got, err, want)
		}
	}
	for rev, wantIn := range map[string][]string{
		"dev":       {`revision "dev" is not in`, "main -> " + c2, "refs/pr/3 -> " + c1, "v1.0 -> " + c1, c2, "in full"},
		c1[:7]:      {"is not in", "in full"}, // short hashes are not resolved offline
		"gone":      {"names commit " + c3, "not in the cache"},
		"refs/pr/9": {`revision "refs/pr/9" is not in`},
		"../x":      {"want a branch, tag or commit hash"},
		"/abs":      {"want a branch, tag or commit hash"},
		"":          {"want a branch, tag or commit hash"},
		// Not names of a ref or commit: each would otherwise resolve, to
		// the snapshots folder itself or to main.
		".":          {"want a branch, tag or commit hash"},
		"main/":      {"want a branch, tag or commit hash"},
		"./main":     {"want a branch, tag or commit hash"},
		"refs//main": {"want a branch, tag or commit hash"},
		`C:main`:     {"want a branch, tag or commit hash"},
		`..\x`:       {"want a branch, tag or commit hash"},
		"dot":        {"does not hold a commit hash"}, // refs/dot holds "."
	} {
		_, err := SnapshotAt(repo, rev)
		if err == nil {
			t.Errorf("SnapshotAt(%q): no error", rev)
			continue
		}
		for _, w := range wantIn {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("SnapshotAt(%q) = %v; want it to contain %q", rev, err, w)
			}
		}
	}
	if _, err := SnapshotAt(t.TempDir(), "main"); err == nil || !strings.Contains(err.Error(), "holds no snapshots") {
		t.Errorf("an empty repository: %v", err)
	}
}
