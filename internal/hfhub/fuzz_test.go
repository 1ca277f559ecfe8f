package hfhub

import (
	"fmt"
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

// FuzzCheckRevision: a revision CheckRevision accepts names a file strictly
// inside the refs folder and a folder strictly inside the snapshots folder
// (no "..", ".", "" or Windows path in it: it is clean and relative), and a
// refused one is named in the error.
func FuzzCheckRevision(f *testing.F) {
	for _, s := range []string{"main", "refs/pr/3", "v1.0", "607a30d", "../x", "/abs", "main/", "./main", "a//b", `C:x`, `..\x`, "...", ""} {
		f.Add(s)
	}
	repo := filepath.Join(string(filepath.Separator), "repo")
	f.Fuzz(func(t *testing.T, rev string) {
		if err := CheckRevision(rev); err != nil {
			if !strings.Contains(err.Error(), fmt.Sprintf("revision %q", rev)) {
				t.Fatalf("CheckRevision(%q) = %v: does not name the revision", rev, err)
			}
			return
		}
		if path.Clean(rev) != rev || path.IsAbs(rev) || strings.ContainsAny(rev, `\:`) {
			t.Fatalf("CheckRevision accepted %q, not a clean relative name", rev)
		}
		for _, sub := range []string{"refs", "snapshots"} {
			base := filepath.Join(repo, sub)
			if p := filepath.Join(base, filepath.FromSlash(rev)); !strings.HasPrefix(p, base+string(filepath.Separator)) {
				t.Fatalf("CheckRevision accepted %q, which names %q, not a file under %q", rev, p, base)
			}
		}
	})
}

// FuzzExpandPath: ExpandPath agrees with a reference written from Python's
// os.path.expandvars(os.path.expanduser(p)) (posixpath in CPython 3.11), less
// what its doc says it does otherwise: an empty variable is left as written,
// like an unset one, a `~\` prefix is the home folder too (Windows), and the
// home folder is used as given (expanduser strips a trailing '/' from it,
// which only doubles a separator in the same path). Variables: HOME and A
// hold fuzzed values, everything else is unset.
func FuzzExpandPath(f *testing.F) {
	for _, s := range [][3]string{
		{"~/x", "/h", "/a"}, {"$A/b", "/h", "/a"}, {"${A}b", "", "v"}, {"${UNSET$A}", "/h", "/a"}, {"${$A}", "/h", "x"},
		{"${A/$A}", "/h", "/a"}, {"$$A", "/h", "/a"}, {"${}x$A", "/h", "/a"}, {"${A", "/h", "/a"}, {"~", "$A", "/a"},
		{"cost$", "", ""}, {`~\x`, `C:\u`, ""}, {"~x/$HOME", "/h", ""},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, p, home, a string) {
		env := map[string]string{"HOME": home, "A": a}
		getenv := func(k string) string { return env[k] }
		if got, want := ExpandPath(p, getenv), refExpandPath(p, env); got != want {
			t.Fatalf("ExpandPath(%q) with HOME=%q A=%q = %q, want %q", p, home, a, got, want)
		}
	})
}

// refExpandPath is os.path.expandvars(os.path.expanduser(p)) as CPython's
// posixpath writes them, with the differences FuzzExpandPath lists.
func refExpandPath(p string, env map[string]string) string {
	// expanduser: "~" or "~/..." (here also `~\...`); "~user" is left.
	if strings.HasPrefix(p, "~") {
		i := strings.IndexAny(p[1:], `/\`) + 1
		if i == 0 {
			i = len(p)
		}
		if h := env["HOME"]; i == 1 && h != "" {
			p = h + p[1:]
		}
	}
	// expandvars: re.compile(r'\$(\w+|\{[^}]*\})', re.ASCII); an unset
	// variable's whole reference is skipped, a set one's value is not
	// scanned again.
	for i := 0; ; {
		j := strings.IndexByte(p[i:], '$')
		if j < 0 {
			return p
		}
		start := i + j
		end := start + 1
		if end < len(p) && p[end] == '{' {
			k := strings.IndexByte(p[end:], '}')
			if k < 0 {
				i = start + 1 // no match here: search from the next character
				continue
			}
			end += k + 1
		} else {
			for end < len(p) && isNameByte(p[end]) {
				end++
			}
			if end == start+1 {
				i = start + 1
				continue
			}
		}
		name := strings.TrimSuffix(strings.TrimPrefix(p[start+1:end], "{"), "}")
		v, set := env[name]
		if !set || v == "" {
			i = end
			continue
		}
		p = p[:start] + v + p[end:]
		i = start + len(v)
	}
}
