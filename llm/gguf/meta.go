package gguf

import (
	"fmt"
	"math"
)

// The typed accessors below read a metadata value and say, when it is
// missing or of another type, which key and what it holds: GGUF writers
// differ in the integer widths they use (uint32 for counts in llama.cpp's
// files, int32 or uint64 elsewhere), so integers of any width are taken.

// Has reports whether the metadata has key.
func (f *File) Has(key string) bool { _, ok := f.keys[key]; return ok }

func (f *File) missing(key string) error {
	return fmt.Errorf("%w: gguf: metadata key %q is missing", ErrBad, key)
}

func wrongType(key string, v any, want string) error {
	return fmt.Errorf("%w: gguf: metadata %q is %T, want %s", ErrBad, key, v, want)
}

// String returns a string value.
func (f *File) String(key string) (string, error) {
	v, ok := f.Get(key)
	if !ok {
		return "", f.missing(key)
	}
	s, ok := v.(string)
	if !ok {
		return "", wrongType(key, v, "a string")
	}
	return s, nil
}

// Bool returns a bool value.
func (f *File) Bool(key string) (bool, error) {
	v, ok := f.Get(key)
	if !ok {
		return false, f.missing(key)
	}
	b, ok := v.(bool)
	if !ok {
		return false, wrongType(key, v, "a bool")
	}
	return b, nil
}

// asInt is an integer value of any width as an int64.
func asInt(v any) (int64, bool) {
	switch v := v.(type) {
	case uint8:
		return int64(v), true
	case int8:
		return int64(v), true
	case uint16:
		return int64(v), true
	case int16:
		return int64(v), true
	case uint32:
		return int64(v), true
	case int32:
		return int64(v), true
	case uint64:
		if v > math.MaxInt64 {
			return 0, false
		}
		return int64(v), true
	case int64:
		return v, true
	}
	return 0, false
}

// Int returns an integer value of any width.
func (f *File) Int(key string) (int64, error) {
	v, ok := f.Get(key)
	if !ok {
		return 0, f.missing(key)
	}
	n, ok := asInt(v)
	if !ok {
		return 0, wrongType(key, v, "an integer")
	}
	return n, nil
}

// Float returns a float32 or float64 value.
func (f *File) Float(key string) (float64, error) {
	v, ok := f.Get(key)
	if !ok {
		return 0, f.missing(key)
	}
	switch v := v.(type) {
	case float32:
		return float64(v), nil
	case float64:
		return v, nil
	}
	return 0, wrongType(key, v, "a float")
}

// Strings returns an array of strings.
func (f *File) Strings(key string) ([]string, error) {
	v, ok := f.Get(key)
	if !ok {
		return nil, f.missing(key)
	}
	s, ok := v.([]string)
	if !ok {
		return nil, wrongType(key, v, "an array of strings")
	}
	return s, nil
}

// Ints returns an array of integers of any width.
func (f *File) Ints(key string) ([]int64, error) {
	v, ok := f.Get(key)
	if !ok {
		return nil, f.missing(key)
	}
	var out []int64
	conv := func(n int, at func(int) any) error {
		out = make([]int64, n)
		for i := range out {
			x, ok := asInt(at(i))
			if !ok {
				return wrongType(key, v, "an array of integers")
			}
			out[i] = x
		}
		return nil
	}
	var err error
	switch a := v.(type) {
	case []int32:
		err = conv(len(a), func(i int) any { return a[i] })
	case []uint32:
		err = conv(len(a), func(i int) any { return a[i] })
	case []int64:
		err = conv(len(a), func(i int) any { return a[i] })
	case []uint64:
		err = conv(len(a), func(i int) any { return a[i] })
	case []int8:
		err = conv(len(a), func(i int) any { return a[i] })
	case []uint8:
		err = conv(len(a), func(i int) any { return a[i] })
	case []int16:
		err = conv(len(a), func(i int) any { return a[i] })
	case []uint16:
		err = conv(len(a), func(i int) any { return a[i] })
	default:
		err = wrongType(key, v, "an array of integers")
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}
