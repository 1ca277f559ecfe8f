package sweep

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// writeFileAtomic writes data to path through a temporary file in the same
// folder and a rename, so a crash leaves either the old file or the new one,
// never half of one.
func writeFileAtomic(path string, data []byte) error {
	return writeVia(path, data, func(tmp string) error { return os.Rename(tmp, path) })
}

// writeNewFileAtomic writes data to a temporary file and publishes it at
// path with [publishNew].
func writeNewFileAtomic(path string, data []byte) error {
	return writeVia(path, data, func(tmp string) error { return publishNew(tmp, path) })
}

// WriteNewFile writes data to path through a temporary file and never
// replaces a file already there: it fails with an error wrapping
// fs.ErrExist instead. It is how evidence is written, here and by
// cmd/sendrequests.
func WriteNewFile(path string, data []byte) error { return writeNewFileAtomic(path, data) }

// writeVia writes data, synced, to a temporary file beside path and hands
// its name to publish; the temporary file is removed if anything fails.
func writeVia(path string, data []byte, publish func(tmp string) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	// CreateTemp makes the file private (0600); reports and summaries are
	// meant to be read and shared like the records beside them.
	werr := tmp.Chmod(0o644)
	if werr == nil {
		_, werr = tmp.Write(data)
	}
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	crashPoint("temporary file written")
	if werr == nil {
		werr = publish(name)
	}
	if werr != nil {
		os.Remove(name)
	}
	return werr
}

// publishNew moves the finished temporary file tmp to path, failing with
// fs.ErrExist rather than replacing a file already there: evidence is never
// overwritten. A hard link gives that guarantee atomically; where links are
// not supported it falls back to a check and a rename.
func publishNew(tmp, path string) error {
	if err := os.Link(tmp, path); err == nil {
		crashPoint("linked")
		return os.Remove(tmp)
	} else if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("refusing to overwrite %s: %w", path, fs.ErrExist)
	}
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("refusing to overwrite %s: %w", path, fs.ErrExist)
	}
	return os.Rename(tmp, path)
}

// crashHook, when set (by the kill tests only), is called at every step
// between two states of the files on disk, where a SIGKILL would leave the
// earlier state and the later one half done.
var crashHook func(at string)

// crashPoint marks such a step.
func crashPoint(at string) {
	if crashHook != nil {
		crashHook(at)
	}
}

// marshalIndent is JSON with two-space indentation and a final newline, the
// layout serving-inference writes; HTML characters are not escaped so that
// prompts and errors stay readable.
func marshalIndent(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func exists(path string) (bool, error) {
	_, err := os.Lstat(path)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, err
}

// FileSHA256 returns the hex SHA-256 of the file at path.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
