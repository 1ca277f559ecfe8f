package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"github.com/dlclark/regexp2"
	"golang.org/x/text/unicode/norm"
)

// componentType reads the "type" field every tokenizer.json component has.
// A null or absent component gives "".
func componentType(raw json.RawMessage, what string) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var c struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return "", fmt.Errorf("tokenizer.json %s: %w", what, err)
	}
	if c.Type == "" {
		return "", fmt.Errorf("tokenizer.json %s has no type", what)
	}
	return c.Type, nil
}

// normalizer rewrites text before pre-tokenization.
type normalizer interface{ normalize(string) string }

type unicodeNormalizer struct{ form norm.Form }

func (n unicodeNormalizer) normalize(s string) string { return n.form.String(s) }

// lowercaseNormalizer is Hugging Face's Lowercase: each character through
// Rust's char::to_lowercase, the full Unicode mapping without context (a
// final Σ becomes σ). It differs from Go's simple mapping, which
// strings.ToLower uses, only for U+0130 (İ): "i" there, "i" followed by
// U+0307 COMBINING DOT ABOVE in Rust.
type lowercaseNormalizer struct{}

func (lowercaseNormalizer) normalize(s string) string {
	return strings.ToLower(strings.ReplaceAll(s, "\u0130", "i\u0307"))
}

type sequenceNormalizer []normalizer

func (q sequenceNormalizer) normalize(s string) string {
	for _, n := range q {
		s = n.normalize(s)
	}
	return s
}

func parseNormalizer(raw json.RawMessage) (normalizer, error) {
	typ, err := componentType(raw, "normalizer")
	if err != nil || typ == "" {
		return nil, err
	}
	switch typ {
	case "NFC":
		return unicodeNormalizer{norm.NFC}, nil
	case "NFD":
		return unicodeNormalizer{norm.NFD}, nil
	case "NFKC":
		return unicodeNormalizer{norm.NFKC}, nil
	case "NFKD":
		return unicodeNormalizer{norm.NFKD}, nil
	case "Lowercase":
		return lowercaseNormalizer{}, nil
	case "Sequence":
		var s struct {
			Normalizers []json.RawMessage `json:"normalizers"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("tokenizer.json Sequence normalizer: %w", err)
		}
		var seq sequenceNormalizer
		for _, r := range s.Normalizers {
			n, err := parseNormalizer(r)
			if err != nil {
				return nil, err
			}
			if n != nil {
				seq = append(seq, n)
			}
		}
		if len(seq) == 0 {
			return nil, nil
		}
		return seq, nil
	default:
		return nil, fmt.Errorf("%w: normalizer %q (supported: NFC, NFD, NFKC, NFKD, Lowercase, Sequence)", ErrUnsupported, typ)
	}
}

// preTokenizer cuts a piece of text into smaller pieces, appending them to
// dst. Empty pieces are never produced.
type preTokenizer interface {
	split(dst []string, piece string) []string
}

// splitBehavior says what happens to the delimiters a Split pre-tokenizer
// finds (Hugging Face's SplitDelimiterBehavior).
type splitBehavior int

const (
	behaviorRemoved splitBehavior = iota
	behaviorIsolated
	behaviorMergedWithPrevious
	behaviorMergedWithNext
	behaviorContiguous
)

// parseBehavior reads a SplitDelimiterBehavior name.
func parseBehavior(name string) (splitBehavior, bool) {
	switch name {
	case "Removed":
		return behaviorRemoved, true
	case "Isolated":
		return behaviorIsolated, true
	case "MergedWithPrevious":
		return behaviorMergedWithPrevious, true
	case "MergedWithNext":
		return behaviorMergedWithNext, true
	case "Contiguous":
		return behaviorContiguous, true
	}
	return 0, false
}

// span is a run of runes [start, end) that is or is not a delimiter match.
type span struct {
	start, end int
	match      bool
}

// applyBehavior turns match/non-match spans covering the text into the pieces
// to keep, as Hugging Face's NormalizedString::split does.
func applyBehavior(spans []span, b splitBehavior, invert bool) []span {
	if invert {
		for i := range spans {
			spans[i].match = !spans[i].match
		}
	}
	var out []span
	switch b {
	case behaviorIsolated:
		return spans
	case behaviorRemoved:
		for _, s := range spans {
			if !s.match {
				out = append(out, s)
			}
		}
	case behaviorContiguous:
		prev := false
		for i, s := range spans {
			if i > 0 && s.match == prev {
				out[len(out)-1].end = s.end
			} else {
				out = append(out, s)
			}
			prev = s.match
		}
	case behaviorMergedWithPrevious:
		prev := false
		for _, s := range spans {
			if s.match && !prev && len(out) > 0 {
				out[len(out)-1].end = s.end
			} else {
				out = append(out, s)
			}
			prev = s.match
		}
	case behaviorMergedWithNext:
		// Walk backwards: a match joins the piece that follows it.
		prev := false
		for i := len(spans) - 1; i >= 0; i-- {
			s := spans[i]
			if s.match && !prev && len(out) > 0 {
				out[len(out)-1].start = s.start
			} else {
				out = append(out, s)
			}
			prev = s.match
		}
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out
}

// regexSplit is the Split pre-tokenizer (and the regex step of ByteLevel).
// Hugging Face runs these patterns with Oniguruma, a backtracking engine with
// look-around; regexp2 has the same Perl/.NET semantics (leftmost-first
// alternation, (?!...)), which Go's regexp lacks.
type regexSplit struct {
	re       *regexp2.Regexp
	fast     fastPattern // a hand-written matcher for re, or fastNone
	behavior splitBehavior
	invert   bool
}

func (p *regexSplit) split(dst []string, piece string) []string {
	if piece == "" {
		return dst
	}
	runes := []rune(piece)
	var spans []span
	prev := 0
	add := func(start, end int) {
		if prev != start {
			spans = append(spans, span{prev, start, false})
		}
		spans = append(spans, span{start, end, true})
		prev = end
	}
	if p.fast != fastNone {
		for i := 0; i < len(runes); {
			if e := p.fast.match(runes, i); e > i {
				add(i, e)
				i = e
			} else {
				i++
			}
		}
	} else {
		m, err := p.re.FindRunesMatch(runes)
		for err == nil && m != nil {
			add(m.Index, m.Index+m.Length)
			m, err = p.re.FindNextMatch(m)
		}
	}
	if prev != len(runes) {
		spans = append(spans, span{prev, len(runes), false})
	}
	for _, s := range applyBehavior(spans, p.behavior, p.invert) {
		if s.end > s.start {
			dst = append(dst, string(runes[s.start:s.end]))
		}
	}
	return dst
}

// digitsSplit is the Digits pre-tokenizer: digits apart from the rest, one
// by one or in runs.
type digitsSplit struct{ individual bool }

func (p digitsSplit) split(dst []string, piece string) []string {
	runes := []rune(piece)
	var spans []span
	last := 0
	for i, r := range runes {
		if unicode.IsNumber(r) {
			if last < i {
				spans = append(spans, span{last, i, false})
			}
			spans = append(spans, span{i, i + 1, true})
			last = i + 1
		}
	}
	if last < len(runes) {
		spans = append(spans, span{last, len(runes), false})
	}
	b := behaviorContiguous
	if p.individual {
		b = behaviorIsolated
	}
	for _, s := range applyBehavior(spans, b, false) {
		if s.end > s.start {
			dst = append(dst, string(runes[s.start:s.end]))
		}
	}
	return dst
}

// byteLevelSplit is the ByteLevel pre-tokenizer. The byte-to-rune mapping it
// does in Hugging Face is implicit here (the BPE model works on raw bytes);
// what remains is the optional prefix space, added to every piece that does
// not start with one, and the optional GPT-2 regex split.
type byteLevelSplit struct {
	addPrefixSpace bool
	regex          *regexSplit // nil without use_regex
}

func (p byteLevelSplit) split(dst []string, piece string) []string {
	if piece == "" {
		return dst
	}
	if p.addPrefixSpace && !strings.HasPrefix(piece, " ") {
		piece = " " + piece
	}
	if p.regex == nil {
		return append(dst, piece)
	}
	return p.regex.split(dst, piece)
}

// parsePreTokenizer flattens the pre-tokenizer into the sequence to apply.
// A ByteLevel step must come last: later steps would see byte-level text,
// which this package never builds.
func parsePreTokenizer(raw json.RawMessage) ([]preTokenizer, error) {
	var seq []preTokenizer
	if err := appendPreTokenizer(&seq, raw); err != nil {
		return nil, err
	}
	hasByteLevel := false
	for i, p := range seq {
		if _, ok := p.(byteLevelSplit); ok {
			if i != len(seq)-1 {
				return nil, fmt.Errorf("%w: pre-tokenizers after ByteLevel", ErrUnsupported)
			}
			hasByteLevel = true
		}
	}
	if !hasByteLevel {
		return nil, fmt.Errorf("%w: pre_tokenizer without ByteLevel (only byte-level BPE tokenizers are supported)", ErrUnsupported)
	}
	return seq, nil
}

func appendPreTokenizer(seq *[]preTokenizer, raw json.RawMessage) error {
	typ, err := componentType(raw, "pre_tokenizer")
	if err != nil {
		return err
	}
	switch typ {
	case "":
		return nil
	case "Sequence":
		var s struct {
			PreTokenizers []json.RawMessage `json:"pretokenizers"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("tokenizer.json Sequence pre_tokenizer: %w", err)
		}
		for _, r := range s.PreTokenizers {
			if err := appendPreTokenizer(seq, r); err != nil {
				return err
			}
		}
		return nil
	case "Split":
		var s struct {
			Pattern struct {
				Regex  *string `json:"Regex"`
				String *string `json:"String"`
			} `json:"pattern"`
			Behavior string `json:"behavior"`
			Invert   bool   `json:"invert"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("tokenizer.json Split pre_tokenizer: %w", err)
		}
		b, ok := parseBehavior(s.Behavior)
		if !ok {
			return fmt.Errorf("%w: Split behavior %q", ErrUnsupported, s.Behavior)
		}
		var expr string
		switch {
		case s.Pattern.Regex != nil:
			expr = *s.Pattern.Regex
		case s.Pattern.String != nil:
			if *s.Pattern.String == "" {
				return nil // an empty string matches nothing: the split is a no-op
			}
			expr = regexp2.Escape(*s.Pattern.String)
		default:
			return fmt.Errorf("tokenizer.json Split pre_tokenizer has no Regex or String pattern")
		}
		re, err := regexp2.Compile(expr, regexp2.None)
		if err != nil {
			return fmt.Errorf("%w: Split regex %q: %v", ErrUnsupported, expr, err)
		}
		var fast fastPattern
		if s.Pattern.Regex != nil {
			fast = fastPatternFor(expr)
		}
		*seq = append(*seq, &regexSplit{re: re, fast: fast, behavior: b, invert: s.Invert})
		return nil
	case "ByteLevel":
		s := struct {
			AddPrefixSpace bool `json:"add_prefix_space"`
			UseRegex       bool `json:"use_regex"`
		}{AddPrefixSpace: true, UseRegex: true} // Hugging Face's defaults
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("tokenizer.json ByteLevel pre_tokenizer: %w", err)
		}
		p := byteLevelSplit{addPrefixSpace: s.AddPrefixSpace}
		if s.UseRegex {
			p.regex = &regexSplit{re: regexp2.MustCompile(gpt2Pattern, regexp2.None), fast: fastGPT2, behavior: behaviorIsolated}
		}
		*seq = append(*seq, p)
		return nil
	case "Digits":
		var s struct {
			IndividualDigits bool `json:"individual_digits"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("tokenizer.json Digits pre_tokenizer: %w", err)
		}
		*seq = append(*seq, digitsSplit{individual: s.IndividualDigits})
		return nil
	default:
		return fmt.Errorf("%w: pre_tokenizer %q (supported: ByteLevel, Split, Digits, Sequence)", ErrUnsupported, typ)
	}
}

// checkDecoder requires the ByteLevel decoder (alone or as the only step of a
// Sequence), which is what Decode implements.
func checkDecoder(raw json.RawMessage) error {
	typ, err := componentType(raw, "decoder")
	if err != nil {
		return err
	}
	switch typ {
	case "ByteLevel":
		return nil
	case "Sequence":
		var s struct {
			Decoders []json.RawMessage `json:"decoders"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("tokenizer.json Sequence decoder: %w", err)
		}
		if len(s.Decoders) != 1 {
			return fmt.Errorf("%w: decoder Sequence of %d steps (only [ByteLevel])", ErrUnsupported, len(s.Decoders))
		}
		return checkDecoder(s.Decoders[0])
	case "":
		return fmt.Errorf("%w: no decoder (byte-level BPE needs the ByteLevel decoder)", ErrUnsupported)
	default:
		return fmt.Errorf("%w: decoder %q (only ByteLevel)", ErrUnsupported, typ)
	}
}
