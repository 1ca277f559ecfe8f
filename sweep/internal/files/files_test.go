package files

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPublishNewNeverOverwrites(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.json")
	require.NoError(t, WriteNew(p, []byte("one")))
	err := WriteNew(p, []byte("two"))
	require.Error(t, err)
	assert.True(t, errors.Is(err, fs.ErrExist))
	b, _ := os.ReadFile(p)
	assert.Equal(t, "one", string(b))
	entries, _ := os.ReadDir(dir)
	assert.Len(t, entries, 1, "no temporary file is left behind")

	require.NoError(t, WriteAtomic(p, []byte("three")))
	b, _ = os.ReadFile(p)
	assert.Equal(t, "three", string(b))
}
