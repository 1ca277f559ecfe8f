// Package ziptest rewrites zip archives for tests of the PyTorch checkpoint
// reader (a torch.save zip file is a zip archive): one entry edited,
// dropped or added, to make the damaged files a loader must refuse.
package ziptest

import (
	"archive/zip"
	"bytes"
	"io"
	"testing"
)

// Rezip rewrites the zip file at path with edit applied to each entry
// (name, method, contents), leaving out the entries edit drops, and adds
// the extra entries (name, contents).
func Rezip(t testing.TB, path string, edit func(name string, method *uint16, body []byte) ([]byte, bool), extra ...string) []byte {
	t.Helper()
	src, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, f := range src.File {
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		var body bytes.Buffer
		if _, err := body.ReadFrom(r); err != nil {
			t.Fatal(err)
		}
		r.Close()
		method := zip.Store
		b, keep := edit(f.Name, &method, body.Bytes())
		if !keep {
			continue
		}
		out, err := w.CreateHeader(&zip.FileHeader{Name: f.Name, Method: method})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := out.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i+1 < len(extra); i += 2 {
		out, err := w.CreateHeader(&zip.FileHeader{Name: extra[i], Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := out.Write([]byte(extra[i+1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// RezipRaw rewrites the zip archive src entry by entry, edit applied to
// each entry's stored bytes, without reading any entry through
// archive/zip's checksum (zip-torch2-layout.bin's CRC-32s are 0). Every
// entry keeps its header: CRC-32, flags and method.
func RezipRaw(t testing.TB, src []byte, edit func(name string, body []byte) []byte) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(src), int64(len(src)))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, f := range zr.File {
		r, err := f.OpenRaw()
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		body = edit(f.Name, body)
		fh := f.FileHeader
		fh.CompressedSize64, fh.UncompressedSize64 = uint64(len(body)), uint64(len(body))
		out, err := w.CreateRaw(&fh)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := out.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
