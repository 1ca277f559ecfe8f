package loadgen

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"

	"github.com/tinyserve/tinyserve/sweep/internal/files"
)

// WriteNewFile writes data to path through a temporary file and never
// replaces a file already there: it fails with an error wrapping
// fs.ErrExist instead. It is how evidence is written, by the runner and by
// cmd/sendrequests.
func WriteNewFile(path string, data []byte) error { return files.WriteNew(path, data) }

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
