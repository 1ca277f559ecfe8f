package openai

import (
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
)

// pythonInt reads s as Python's int(s) reads a str, which is how vLLM turns
// a logit_bias key into a token id (SamplingParams.from_optional in
// vllm/sampling_params.py). int() takes more than plain decimal: Unicode
// whitespace around the number (what Go's unicode.IsSpace calls space), one
// sign, leading zeros, single underscores between digits ("1_0"), and any
// Unicode decimal digit (category Nd: "٥" is 5). ok is false where int()
// would raise ValueError. A number int() accepts but an int cannot hold
// gives ok true and fits false: no token has such an id.
func pythonInt(s string) (v int, ok, fits bool) {
	s = strings.TrimFunc(s, unicode.IsSpace)
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if s == "" {
		return 0, false, false
	}
	var u uint64
	// The largest magnitude an int holds: one more below zero, so that
	// -9223372036854775808 fits, as this function's doc says it must.
	limit := uint64(math.MaxInt)
	if neg {
		limit++
	}
	fits = true
	afterDigit := false // an underscore may follow a digit only
	for _, r := range s {
		if r == '_' {
			if !afterDigit {
				return 0, false, false
			}
			afterDigit = false
			continue
		}
		d, isDigit := decimalValue(r)
		if !isDigit {
			return 0, false, false
		}
		afterDigit = true
		if u > (limit-uint64(d))/10 {
			fits = false
		} else if fits {
			u = u*10 + uint64(d)
		}
	}
	if !afterDigit { // empty after the sign, or a trailing underscore
		return 0, false, false
	}
	if !fits {
		return 0, true, false
	}
	if neg {
		return int(-u), true, true // two's complement: u may be 1<<63
	}
	return int(u), true, true
}

// decimalValue is the value of a Unicode decimal digit (category Nd), as
// Python's int() reads it. Unicode lays every such digit out in runs of ten
// code points valued 0 to 9 in order, some runs back to back (the
// mathematical digits U+1D7CE to U+1D7FF are five), so the value is the
// distance from the start of the digits' run, modulo ten.
func decimalValue(r rune) (int, bool) {
	if '0' <= r && r <= '9' {
		return int(r - '0'), true
	}
	if r < utf8.RuneSelf || !unicode.Is(unicode.Nd, r) {
		return 0, false
	}
	start := r
	for start > 0 && unicode.Is(unicode.Nd, start-1) {
		start--
	}
	return int(r-start) % 10, true
}
