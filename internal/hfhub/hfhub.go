// Package hfhub finds things in a local Hugging Face hub cache, laid out as
// huggingface_hub lays it out (CACHE/models--ORG--NAME/snapshots/REVISION/,
// with refs/main naming the revision last fetched). It reads only local
// folders: nothing is ever downloaded.
package hfhub

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// CacheDir returns the hub cache folder as huggingface_hub resolves it from
// the environment (read through getenv): $HF_HUB_CACHE, else the older
// $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub ($HOME,
// or $USERPROFILE on Windows). "" when none of them is set. A leading ~
// and $VAR or ${VAR} in the value are expanded (see ExpandPath), as
// huggingface_hub expands them: HF_HOME=~/hf in a .env file or a
// container's environment, where no shell expands it, is ~/hf.
func CacheDir(getenv func(string) string) string {
	for _, v := range []string{"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"} {
		if d := getenv(v); d != "" {
			return ExpandPath(d, getenv)
		}
	}
	if d := getenv("HF_HOME"); d != "" {
		return filepath.Join(ExpandPath(d, getenv), "hub")
	}
	if d := getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(ExpandPath(d, getenv), "huggingface", "hub")
	}
	if d := home(getenv); d != "" {
		return filepath.Join(d, ".cache", "huggingface", "hub")
	}
	return ""
}

// home is the user's home folder: $HOME, or $USERPROFILE on Windows.
func home(getenv func(string) string) string {
	for _, v := range []string{"HOME", "USERPROFILE"} {
		if d := getenv(v); d != "" {
			return d
		}
	}
	return ""
}

// ExpandPath expands p as huggingface_hub expands its cache variables
// (Python's os.path.expandvars(os.path.expanduser(p))): a leading ~ (alone,
// or before a path separator) becomes the home folder, then $NAME and
// ${NAME} become the variable's value read through getenv. A variable that
// is unset (or empty), like a ~ without a home folder, is left as written.
func ExpandPath(p string, getenv func(string) string) string {
	if p == "~" || strings.HasPrefix(p, "~/") || strings.HasPrefix(p, `~\`) {
		if h := home(getenv); h != "" {
			p = h + p[1:]
		}
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(p, '$')
		if i < 0 {
			b.WriteString(p)
			return b.String()
		}
		b.WriteString(p[:i])
		p = p[i:]
		name, n := "", 0 // the variable's name, and the length of its reference
		if strings.HasPrefix(p, "${") {
			if j := strings.IndexByte(p, '}'); j >= 2 {
				name, n = p[2:j], j+1
				if strings.ContainsRune(name, '/') {
					name = "" // names no variable: left as written
				}
			}
		} else {
			for n = 1; n < len(p) && isNameByte(p[n]); n++ {
			}
			name = p[1:n]
		}
		if v := getenv(name); name != "" && v != "" {
			b.WriteString(v)
			p = p[n:]
			continue
		}
		// Not a reference, or one to a variable not set: left as written,
		// all of it, as expandvars skips its whole match. Skipping only the
		// '$' expanded a '$' inside it: "${UNSET$A}" became "${UNSET/a}".
		n = max(n, 1)
		b.WriteString(p[:n])
		p = p[n:]
	}
}

func isNameByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// RepoDir is the folder of model repository id (ORG/NAME, or a bare NAME
// such as gpt2) in the cache folder cache.
func RepoDir(cache, id string) string {
	return filepath.Join(cache, "models--"+strings.ReplaceAll(id, "/", "--"))
}

// SnapshotOf reads a snapshot folder's place in a hub cache: for
// CACHE/models--ORG--NAME/snapshots/COMMIT it returns ORG/NAME and COMMIT
// (the inverse of RepoDir and a snapshot's name); ok is false for a folder
// not laid out so. Only the path is read, so a moved cache names the same
// repository and commit. Hub ids never contain "--" (the Hub refuses them),
// which is what makes the folder's name reversible.
func SnapshotOf(dir string) (id, commit string, ok bool) {
	dir = filepath.Clean(dir)
	snapshots := filepath.Dir(dir)
	repo := filepath.Base(filepath.Dir(snapshots))
	commit = filepath.Base(dir)
	name, found := strings.CutPrefix(repo, "models--")
	if !found || filepath.Base(snapshots) != "snapshots" || snapshots == dir || commit == "." || commit == ".." || commit == string(filepath.Separator) {
		return "", "", false
	}
	id = strings.ReplaceAll(name, "--", "/")
	if !IsRepoID(id) {
		return "", "", false
	}
	return id, commit, true
}

// IsRepoID reports whether s looks like a Hugging Face repository id (NAME
// or ORG/NAME) rather than a file path. It follows the Hub's rule
// (huggingface_hub's validate_repo_id): each name is letters, digits, '-',
// '_' and '.', beginning and ending with a letter, digit or '_', and there is
// no "--" or ".." anywhere. Without that rule "a/.." and "a/." were ids
// (paths, resolving to another folder), and so were "a--b" and "a-/b", whose
// cache folders (models--a--b, models--a---b) read back as other ids (see
// SnapshotOf). A name ending in .json is a file, not an id.
func IsRepoID(s string) bool {
	if strings.HasSuffix(s, ".json") || strings.Contains(s, "--") || strings.Contains(s, "..") {
		return false
	}
	names := strings.Split(s, "/")
	if len(names) > 2 {
		return false
	}
	for _, n := range names {
		if n == "" || !isNameByte(n[0]) || !isNameByte(n[len(n)-1]) {
			return false
		}
		for i := 0; i < len(n); i++ {
			if !isNameByte(n[i]) && n[i] != '-' && n[i] != '.' {
				return false
			}
		}
	}
	return true
}

// Snapshot returns the snapshot folder of repoDir that has what the caller
// needs (ok reports it): the one refs/main names when it does, else the
// first in name order that does, so that the choice is deterministic. A
// snapshot may hold only some of a repository's files (a program fetched
// just the tokenizer, say), hence ok.
func Snapshot(repoDir string, ok func(dir string) bool) (string, bool) {
	if ref, err := os.ReadFile(filepath.Join(repoDir, "refs", "main")); err == nil {
		if rev := strings.TrimSpace(string(ref)); rev != "" && !strings.ContainsAny(rev, `/\`) && rev != ".." {
			d := filepath.Join(repoDir, "snapshots", rev)
			if ok(d) {
				return d, true
			}
		}
	}
	entries, err := os.ReadDir(filepath.Join(repoDir, "snapshots"))
	if err != nil {
		return "", false
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	for _, n := range names {
		d := filepath.Join(repoDir, "snapshots", n)
		if ok(d) {
			return d, true
		}
	}
	return "", false
}

// CheckRevision returns an error unless revision can name a branch, tag,
// pull request ("refs/pr/3") or commit of a repository: names separated by
// "/", none of them empty, "." or "..", and no backslash or colon (a Windows
// path's). Git refuses such ref names too; here they would resolve outside
// the repository's refs and snapshots folders ("../x"), to a folder itself
// (".") or to another revision ("main/", "./main").
func CheckRevision(revision string) error {
	bad := revision == "" || strings.ContainsAny(revision, `\:`)
	for _, name := range strings.Split(revision, "/") {
		bad = bad || name == "" || name == "." || name == ".."
	}
	if bad {
		return fmt.Errorf("revision %q: want a branch, tag or commit hash (names separated by \"/\", none empty, \".\" or \"..\")", revision)
	}
	return nil
}

// SnapshotAt returns the snapshot folder of repoDir that revision names,
// resolved as huggingface_hub resolves a revision without the network:
// refs/REVISION, when the cache has it, holds the commit that branch or tag
// (or pull request, "refs/pr/1") was fetched at; otherwise REVISION is
// taken as a commit hash, which must be a snapshot folder's full name. The
// folder is returned whatever it holds (see Snapshot). When the cache does
// not hold the revision, the error lists the revisions it does; a revision
// CheckRevision refuses is an error without looking.
func SnapshotAt(repoDir, revision string) (string, error) {
	if err := CheckRevision(revision); err != nil {
		return "", err
	}
	commit := revision
	if ref, err := os.ReadFile(filepath.Join(repoDir, "refs", filepath.FromSlash(revision))); err == nil {
		commit = strings.TrimSpace(string(ref))
		if commit == "" || strings.ContainsAny(commit, `/\:`) || commit == "." || commit == ".." {
			return "", fmt.Errorf("revision %q: %s does not hold a commit hash", revision, filepath.Join(repoDir, "refs", filepath.FromSlash(revision)))
		}
	} else if strings.Contains(revision, "/") {
		return "", noRevision(repoDir, revision)
	}
	d := filepath.Join(repoDir, "snapshots", commit)
	if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
		if commit != revision {
			return "", fmt.Errorf("revision %q names commit %s, whose snapshot %s is not in the cache", revision, commit, d)
		}
		return "", noRevision(repoDir, revision)
	}
	return d, nil
}

// noRevision is the error for a revision that repoDir does not hold.
func noRevision(repoDir, revision string) error {
	refs, snapshots := Revisions(repoDir)
	held := append(refs, snapshots...)
	if len(held) == 0 {
		return fmt.Errorf("revision %q: %s holds no snapshots", revision, repoDir)
	}
	return fmt.Errorf("revision %q is not in %s, which holds %s (a commit hash must be given in full)", revision, repoDir, strings.Join(held, ", "))
}

// Revisions lists what repoDir holds: the refs it records (branches, tags
// and pull requests, as "name -> commit") and its snapshot folders (commit
// hashes), each sorted.
func Revisions(repoDir string) (refs, snapshots []string) {
	refsDir := filepath.Join(repoDir, "refs")
	_ = filepath.WalkDir(refsDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		name, _ := filepath.Rel(refsDir, p)
		refs = append(refs, filepath.ToSlash(name)+" -> "+strings.TrimSpace(string(b)))
		return nil
	})
	entries, _ := os.ReadDir(filepath.Join(repoDir, "snapshots"))
	for _, e := range entries {
		if e.IsDir() || e.Type()&fs.ModeSymlink != 0 {
			snapshots = append(snapshots, e.Name())
		}
	}
	slices.Sort(refs)
	slices.Sort(snapshots)
	return refs, snapshots
}

// DownloadCommand is the command line that fetches files of repository id
// into the hub cache: `hf download`, the CLI of huggingface_hub 0.34 and
// later (1.0 removed huggingface-cli, whose download subcommand an older
// huggingface_hub has instead, with the same arguments).
func DownloadCommand(id string, files ...string) string {
	return strings.Join(append([]string{"hf", "download", id}, files...), " ")
}

// IsFile reports whether p is a regular file (following symbolic links, as
// a cache's snapshot files are links into its blobs folder).
func IsFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
