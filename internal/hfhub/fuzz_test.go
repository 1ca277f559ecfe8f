package hfhub

import (
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzIsRepoID: an id IsRepoID accepts is NAME or ORG/NAME and never a
// path that leaves its place: it is not empty, has at most one '/', none
// first or last, no '\', no "..", and only letters, digits and "-_./"; it is
// already clean (path.Clean(id) == id), so the id folder a tokenizer folder
// holds (ROOT/ORG/NAME) lies strictly under ROOT; and, as SnapshotOf
// promises, the hub cache folder RepoDir names for it reads back as the same
// id (the "--" in the folder's name must be reversible).
func FuzzIsRepoID(f *testing.F) {
	for _, s := range []string{
		"gpt2", "openai-community/gpt2", "Qwen/Qwen2.5-0.5B-Instruct", "a/..", "a/.", "..",
		"a--b", "a-/b", "org/m--x", "/abs", "a/b/c", "tokenizer.json", `a\b`, "org/", "x y", "é",
	} {
		f.Add(s)
	}
	root := filepath.Join(string(filepath.Separator), "root")
	f.Fuzz(func(t *testing.T, id string) {
		if !IsRepoID(id) {
			return
		}
		if id == "" || strings.HasPrefix(id, "/") || strings.HasSuffix(id, "/") || strings.Count(id, "/") > 1 ||
			strings.Contains(id, "..") || strings.ContainsRune(id, '\\') {
			t.Fatalf("IsRepoID(%q) accepted a path, not NAME or ORG/NAME", id)
		}
		for _, r := range id {
			if !(r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./", r))) {
				t.Fatalf("IsRepoID(%q) accepted %q", id, r)
			}
		}
		if path.Clean(id) != id {
			t.Fatalf("IsRepoID(%q) accepted an id that is not clean (%q)", id, path.Clean(id))
		}
		if dir := filepath.Join(root, filepath.FromSlash(id)); !strings.HasPrefix(dir, root+string(filepath.Separator)) {
			t.Fatalf("IsRepoID(%q): its folder %q is not under %q", id, dir, root)
		}
		snap := filepath.Join(RepoDir(root, id), "snapshots", "abc")
		if filepath.Dir(filepath.Dir(filepath.Dir(snap))) != root {
			t.Fatalf("RepoDir(%q, %q) = %q is not a folder of the cache", root, id, RepoDir(root, id))
		}
		if got, commit, ok := SnapshotOf(snap); !ok || got != id || commit != "abc" {
			t.Fatalf("SnapshotOf(%q) = %q, %q, %v; want %q, \"abc\" (the inverse of RepoDir)", snap, got, commit, ok, id)
		}
	})
}

// FuzzSnapshotOf: SnapshotOf never panics, and what it reads from a folder
// is the folder: the id is one IsRepoID accepts, and RepoDir(CACHE, id)/
// snapshots/commit is the folder (cleaned) again.
func FuzzSnapshotOf(f *testing.F) {
	for _, s := range []string{
		"/c/models--openai-community--gpt2/snapshots/607a30d", "/c/models--gpt2/snapshots/abc/",
		"/c/models--a--b--c/snapshots/x", "models--a/snapshots/..", "/models--a/snapshots", "snapshots/x",
		"/c/models--a---b/snapshots/x", "/c/models--/snapshots/x", "",
	} {
		f.Add(filepath.FromSlash(s))
	}
	f.Fuzz(func(t *testing.T, dir string) {
		id, commit, ok := SnapshotOf(dir)
		if !ok {
			if id != "" || commit != "" {
				t.Fatalf("SnapshotOf(%q) = %q, %q, false", dir, id, commit)
			}
			return
		}
		if !IsRepoID(id) {
			t.Fatalf("SnapshotOf(%q) = id %q, which IsRepoID refuses", dir, id)
		}
		clean := filepath.Clean(dir)
		cache := filepath.Dir(filepath.Dir(filepath.Dir(clean)))
		if back := filepath.Join(RepoDir(cache, id), "snapshots", commit); back != clean {
			t.Fatalf("SnapshotOf(%q) = %q, %q, which names %q", dir, id, commit, back)
		}
	})
}
