package hfhub

import (
	"os"
	"path/filepath"
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
