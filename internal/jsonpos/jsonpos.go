// Package jsonpos turns the byte offset of an encoding/json error into the
// line and column an editor shows, so that a config with a typo names the
// place to fix ("sweep.json:7:3: invalid character ...") rather than a
// byte count nobody can find.
package jsonpos

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Locate reports the 1-based line and column (in bytes) of the JSON syntax
// or type error in err, found in data; ok is false when err carries no
// offset into data.
func Locate(data []byte, err error) (line, col int, ok bool) {
	var offset int64
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		offset = se.Offset
	case errors.As(err, &te):
		offset = te.Offset
	default:
		return 0, 0, false
	}
	// Offset counts the bytes read when the error was found: the byte at
	// fault is the last of them.
	pos := min(max(int(offset)-1, 0), len(data))
	start := bytes.LastIndexByte(data[:pos], '\n') + 1
	return 1 + bytes.Count(data[:pos], []byte{'\n'}), pos - start + 1, true
}

// Wrap prefixes err with name, and with the line and column where Locate
// finds them: "name:line:col: err", else "name: err". It returns nil for a
// nil err.
func Wrap(name string, data []byte, err error) error {
	if err == nil {
		return nil
	}
	if line, col, ok := Locate(data, err); ok {
		return fmt.Errorf("%s:%d:%d: %w", name, line, col, err)
	}
	return fmt.Errorf("%s: %w", name, err)
}
