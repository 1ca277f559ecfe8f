package checkpoint

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strings"
)

// The two layouts of a torch.save file (see torchfile.go): the zip archive
// of PyTorch 1.6 and later, and the legacy format of earlier versions.

// torchLegacyMagic is the first pickle of a legacy torch.save file.
var torchLegacyMagic, _ = new(big.Int).SetString("1950a86a20f9469cfc6c", 16)

// parseTorchZip reads the zip format: <folder>/data.pkl, whose persistent
// ids name the uncompressed entries <folder>/data/<key> that hold the
// storages.
func parseTorchZip(data []byte) (*stHeader, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if errors.Is(err, zip.ErrFormat) {
		// The file starts as a zip (parseTorch checked) but its central
		// directory, at the very end, is not there: what an interrupted
		// download or copy leaves.
		return nil, fmt.Errorf("zip archive: %w: the file starts as a zip but its directory, at the end of the file, is missing or damaged (truncated file?)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("zip archive: %w", err)
	}
	entries := map[string]*zip.File{}
	var pkl *zip.File
	for _, f := range zr.File {
		entries[f.Name] = f
		if dir, ok := strings.CutSuffix(f.Name, "/data.pkl"); ok && !strings.Contains(dir, "/") {
			if pkl != nil {
				return nil, fmt.Errorf("zip archive holds two pickles, %s and %s", pkl.Name, f.Name)
			}
			pkl = f
		}
	}
	if pkl == nil {
		return nil, fmt.Errorf("zip archive without <folder>/data.pkl: not a torch.save file")
	}
	prefix := strings.TrimSuffix(pkl.Name, "data.pkl")
	if bo, ok := entries[prefix+"byteorder"]; ok {
		b, err := readZipEntry(bo, 16)
		if err != nil {
			return nil, err
		}
		if string(b) != "little" {
			return nil, fmt.Errorf("byte order %q is not supported (only little-endian checkpoints are)", b)
		}
	}
	if pkl.UncompressedSize64 > maxHeaderBytes {
		return nil, fmt.Errorf("%s of %d bytes exceeds the %d-byte (100 MB) limit", pkl.Name, pkl.UncompressedSize64, maxHeaderBytes)
	}
	p, err := readZipEntry(pkl, maxHeaderBytes)
	if err != nil {
		return nil, err
	}
	u := &torchUnpickler{storages: map[string]*torchStorage{}}
	v, _, err := unpickle(p, 0, u.hooks())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pkl.Name, err)
	}
	for _, s := range u.storages {
		name := prefix + "data/" + s.key
		f, ok := entries[name]
		if !ok {
			s.err = fmt.Errorf("storage %q: no entry %s in the archive", s.key, name)
			continue
		}
		if f.Method != zip.Store || f.CompressedSize64 != f.UncompressedSize64 {
			s.err = fmt.Errorf("storage %q: entry %s is compressed (method %d); torch.save stores storages uncompressed", s.key, name, f.Method)
			continue
		}
		off, err := f.DataOffset()
		if err != nil {
			s.err = fmt.Errorf("storage %q: %w", s.key, err)
			continue
		}
		s.place(off, f.UncompressedSize64, int64(len(data)))
	}
	return torchHeader(v, int64(len(data)))
}

// readZipEntry reads the entry f of at most limit bytes.
//
// A stored entry whose CRC-32 is 0 is read as it is, unchecked: torch.save
// with torch.utils.serialization.config.save.compute_crc32 = False (torch
// 2.6 and later) leaves every CRC-32 0, and torch loads such a file (its
// zip reader checks no CRC-32 at all). archive/zip checks no CRC-32 of 0
// either, except in an entry with a data descriptor, as torch's writer
// gives every entry, where it would refuse the file with zip.ErrChecksum.
// A CRC-32 that was written is checked.
func readZipEntry(f *zip.File, limit int64) ([]byte, error) {
	var r io.Reader
	if f.CRC32 == 0 && f.Method == zip.Store {
		raw, err := f.OpenRaw()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name, err)
		}
		r = raw
	} else {
		rc, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name, err)
		}
		defer rc.Close()
		r = rc
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: longer than %d bytes", f.Name, limit)
	}
	if uint64(len(b)) != f.UncompressedSize64 {
		// What archive/zip's own reader reports for an entry cut short.
		return nil, fmt.Errorf("%s: %d bytes, its header says %d: %w", f.Name, len(b), f.UncompressedSize64, io.ErrUnexpectedEOF)
	}
	return b, nil
}

// parseTorchLegacy reads the legacy format: five pickles in a row (magic
// number, protocol version, system information, state dict, storage keys),
// then each storage, in the keys' order, as an 8-byte element count and
// its bytes.
func parseTorchLegacy(data []byte) (*stHeader, error) {
	plain := pickleHooks{
		call: func(g pyGlobal, _ pyTuple) (any, error) {
			return nil, fmt.Errorf("refusing to call %s in a legacy checkpoint's preamble", g)
		},
		build:          func(obj, _ any) (any, error) { return nil, fmt.Errorf("BUILD in a legacy checkpoint's preamble") },
		persistentLoad: func(any) (any, error) { return nil, fmt.Errorf("persistent id in a legacy checkpoint's preamble") },
	}
	magic, pos, err := unpickle(data, 0, plain)
	if err != nil {
		return nil, fmt.Errorf("legacy format: %w", err)
	}
	if b, ok := magic.(*big.Int); !ok || b.Cmp(torchLegacyMagic) != 0 {
		return nil, fmt.Errorf("a pickle that does not start with torch.save's magic number: not a PyTorch checkpoint")
	}
	version, pos, err := unpickle(data, pos, plain)
	if err != nil {
		return nil, fmt.Errorf("legacy format: %w", err)
	}
	if version != int64(1001) {
		return nil, fmt.Errorf("legacy format version %s is not supported (1001 is)", describePy(version))
	}
	sysInfo, pos, err := unpickle(data, pos, plain)
	if err != nil {
		return nil, fmt.Errorf("legacy format: %w", err)
	}
	if d, ok := sysInfo.(*pyDict); ok {
		for i, k := range d.keys {
			if k == "little_endian" && d.vals[i] != true {
				return nil, fmt.Errorf("a big-endian checkpoint is not supported")
			}
		}
	}
	u := &torchUnpickler{storages: map[string]*torchStorage{}, legacy: true}
	v, pos, err := unpickle(data, pos, u.hooks())
	if err != nil {
		return nil, fmt.Errorf("legacy format: %w", err)
	}
	keys, pos, err := unpickle(data, pos, plain)
	if err != nil {
		return nil, fmt.Errorf("legacy format: storage keys: %w", err)
	}
	list, ok := keys.(*pyList)
	if !ok {
		return nil, fmt.Errorf("legacy format: storage keys are a %s, not a list", pyTypeName(keys))
	}
	off := int64(pos)
	for _, k := range list.items {
		key, ok := k.(string)
		s := u.storages[key]
		if !ok || s == nil {
			return nil, fmt.Errorf("legacy format: storage key %s is not one the state dict uses", describePy(k))
		}
		if s.placed || s.err != nil {
			return nil, fmt.Errorf("legacy format: storage %q is listed twice", key)
		}
		size := s.numel * dtypeSizes[s.dtype] // no overflow: persistentLoad bounds numel
		if off > int64(len(data))-8 {
			s.err = fmt.Errorf("storage %q: its element count at byte %d is past the end of the file (%d bytes; truncated file?)", key, off, len(data))
			// Every later storage is missing too; each still moves the
			// next one by its state-dict size, so that their errors name
			// where the whole file holds them.
			off = min(off+8+size, math.MaxInt64-8)
			continue
		}
		n := binary.LittleEndian.Uint64(data[off:])
		if n != uint64(s.numel) {
			return nil, fmt.Errorf("storage %q: %d elements in the file, %d in the state dict", key, n, s.numel)
		}
		s.place(off+8, uint64(size), int64(len(data)))
		off = min(off+8+size, math.MaxInt64-8)
	}
	return torchHeader(v, int64(len(data)))
}

// place records that storage s's bytes start at off in a file of fileSize
// bytes, in a region of size bytes, or why its elements do not fit there.
func (s *torchStorage) place(off int64, size uint64, fileSize int64) {
	need := uint64(s.numel) * uint64(dtypeSizes[s.dtype])
	switch {
	case need > size:
		s.err = fmt.Errorf("storage %q: %d elements of %s need %d bytes, its entry holds %d", s.key, s.numel, s.dtype, need, size)
	case off < 0 || off > fileSize || need > uint64(fileSize-off):
		s.err = fmt.Errorf("storage %q: %d bytes at byte %d run past the end of the file (%d bytes; truncated file?)", s.key, need, off, fileSize)
	default:
		s.base, s.placed = off, true
	}
}
