package tokenizer

import "unicode"

// Hand-written matchers for the pre-tokenizer regexes nearly every byte-level
// model uses. The backtracking engine spends most of the encoding time on
// them; these give the same matches (the test checks them against regexp2
// on every rune class and on random text) in a single forward scan. Any
// other pattern goes to regexp2.

// fastPattern names a regex with a hand-written matcher.
type fastPattern int

const (
	fastNone   fastPattern = iota
	fastGPT2               // GPT-2 / r50k, also ByteLevel's use_regex
	fastQwen               // Qwen2, Qwen2.5, Qwen3: digits one by one
	fastLlama3             // Llama 3 / cl100k style: digits in groups of up to 3
)

const (
	qwenPattern   = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

func fastPatternFor(expr string) fastPattern {
	switch expr {
	case gpt2Pattern:
		return fastGPT2
	case qwenPattern:
		return fastQwen
	case llama3Pattern:
		return fastLlama3
	}
	return fastNone
}

// The character classes as regexp2 defines them: \s is unicode.IsSpace,
// \p{L} and \p{N} are Go's Unicode categories.
func isL(r rune) bool     { return unicode.IsLetter(r) }
func isN(r rune) bool     { return unicode.IsNumber(r) }
func isS(r rune) bool     { return unicode.IsSpace(r) }
func isOther(r rune) bool { return !isS(r) && !isL(r) && !isN(r) }
func isCRLF(r rune) bool  { return r == '\r' || r == '\n' }

// at returns r[i], or -1 past the end (no class contains -1).
func at(r []rune, i int) rune {
	if i < len(r) {
		return r[i]
	}
	return -1
}

func runOf(r []rune, i int, in func(rune) bool) int {
	for i < len(r) && in(r[i]) {
		i++
	}
	return i
}

// contraction matches 's 't 're 've 'm 'll 'd at i, optionally ignoring
// case, and returns its end or i.
func contraction(r []rune, i int, fold bool) int {
	if at(r, i) != '\'' {
		return i
	}
	c := func(k int) rune {
		x := at(r, i+k)
		if fold {
			x = unicode.ToLower(x)
		}
		return x
	}
	switch c(1) {
	case 's', 't', 'm', 'd':
		return i + 2
	case 'r', 'v':
		if c(2) == 'e' {
			return i + 3
		}
	case 'l':
		if c(2) == 'l' {
			return i + 3
		}
	}
	return i
}

// spaceTail matches \s+(?!\S)|\s+ at i (r[i] must be whitespace): the run
// without its last character when a non-space follows and the run is longer
// than one, else the whole run.
func spaceTail(r []rune, i int) int {
	j := runOf(r, i, isS)
	if j < len(r) && j-1 > i {
		return j - 1
	}
	return j
}

// match returns the end of the match starting at i, or i when none does.
func (p fastPattern) match(r []rune, i int) int {
	c := r[i]
	switch p {
	case fastGPT2:
		if e := contraction(r, i, false); e > i {
			return e
		}
		start := i
		if c == ' ' {
			start = i + 1
		}
		n := at(r, start)
		switch {
		case isL(n):
			return runOf(r, start, isL)
		case isN(n):
			return runOf(r, start, isN)
		case n >= 0 && isOther(n):
			return runOf(r, start, isOther)
		}
		if isS(c) {
			return spaceTail(r, i)
		}
		return i
	case fastQwen, fastLlama3:
		if e := contraction(r, i, true); e > i {
			return e
		}
		// [^\r\n\p{L}\p{N}]?\p{L}+
		if isL(c) {
			return runOf(r, i, isL)
		}
		if !isCRLF(c) && !isN(c) && isL(at(r, i+1)) {
			return runOf(r, i+1, isL)
		}
		// \p{N} or \p{N}{1,3}
		if isN(c) {
			if p == fastQwen {
				return i + 1
			}
			e := i + 1
			for e < len(r) && e < i+3 && isN(r[e]) {
				e++
			}
			return e
		}
		// ` ?[^\s\p{L}\p{N}]+[\r\n]*`
		start := i
		if c == ' ' && isOther(at(r, i+1)) {
			start = i + 1
		}
		if isOther(at(r, start)) && at(r, start) >= 0 {
			return runOf(r, runOf(r, start, isOther), isCRLF)
		}
		if !isS(c) {
			return i
		}
		// \s*[\r\n]+: up to and including the run's last line break.
		j := runOf(r, i, isS)
		for k := j - 1; k >= i; k-- {
			if isCRLF(r[k]) {
				return k + 1
			}
		}
		return spaceTail(r, i)
	}
	return i
}
