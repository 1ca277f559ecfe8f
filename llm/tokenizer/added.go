package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// addedToken is a token of tokenizer.json's added_tokens: matched in the text
// before normalization and BPE (as Hugging Face's AddedVocabulary does), with
// its matching options.
type addedToken struct {
	id         int
	content    string
	special    bool
	singleWord bool // only matched as a whole word
	lstrip     bool // also swallows whitespace on its left
	rstrip     bool // also swallows whitespace on its right
	normalized bool // matched against normalized text instead of raw text
}

// tokenTrie finds added tokens with leftmost-longest semantics (the
// Aho-Corasick mode Hugging Face uses): the match starting earliest wins, and
// among those the longest.
type tokenTrie struct {
	nodes []trieNode
	first [256]bool // bytes that can start a match, to skip most positions
}

type trieNode struct {
	next  map[byte]int32
	token int32 // index into the added tokens, -1 when no token ends here
}

func newTokenTrie() *tokenTrie {
	return &tokenTrie{nodes: []trieNode{{token: -1}}}
}

func (t *tokenTrie) add(s string, token int) {
	if s == "" {
		return
	}
	t.first[s[0]] = true
	n := int32(0)
	for i := 0; i < len(s); i++ {
		nx, ok := t.nodes[n].next[s[i]]
		if !ok {
			if t.nodes[n].next == nil {
				t.nodes[n].next = make(map[byte]int32)
			}
			nx = int32(len(t.nodes))
			t.nodes[n].next[s[i]] = nx
			t.nodes = append(t.nodes, trieNode{token: -1})
		}
		n = nx
	}
	// The first token listed with this content keeps it, as duplicates in
	// added_tokens all describe the same string.
	if t.nodes[n].token < 0 {
		t.nodes[n].token = int32(token)
	}
}

func (t *tokenTrie) empty() bool { return len(t.nodes) == 1 }

// find returns the leftmost-longest match in s at or after from.
func (t *tokenTrie) find(s string, from int) (start, end, token int, ok bool) {
	for i := from; i < len(s); i++ {
		if !t.first[s[i]] {
			continue
		}
		n, best, bestEnd := int32(0), int32(-1), 0
		for j := i; j < len(s); j++ {
			nx, ok := t.nodes[n].next[s[j]]
			if !ok {
				break
			}
			n = nx
			if t.nodes[n].token >= 0 {
				best, bestEnd = t.nodes[n].token, j+1
			}
		}
		if best >= 0 {
			return i, bestEnd, int(best), true
		}
	}
	return 0, 0, 0, false
}

// segment is a piece of input text: either an added token (token >= 0) or
// text still to be tokenized.
type segment struct {
	text  string
	token int // index into added tokens, or -1
}

// splitAdded cuts s at the added tokens of trie, following Hugging Face's
// AddedVocabulary.find_matches: matches are found over all tokens, a special
// token is passed over (left as text) when skipSpecial, single_word tokens
// must not touch word characters, and lstrip/rstrip extend a match over
// neighbouring whitespace. Empty segments are dropped.
func splitAdded(dst []segment, s string, trie *tokenTrie, tokens []addedToken, skipSpecial bool) []segment {
	if trie == nil || trie.empty() {
		if s != "" {
			dst = append(dst, segment{s, -1})
		}
		return dst
	}
	done := 0 // end of the last emitted segment
	for from := 0; from < len(s); {
		start, end, tok, ok := trie.find(s, from)
		if !ok {
			break
		}
		from = end
		at := tokens[tok]
		if skipSpecial && at.special {
			continue
		}
		if at.singleWord && (endsWithWordChar(s[:start]) || startsWithWordChar(s[end:])) {
			continue
		}
		if at.lstrip {
			start = max(done, start-trailingSpace(s[:start]))
		}
		if at.rstrip {
			end += leadingSpace(s[end:])
			from = end
		}
		if done < start {
			dst = append(dst, segment{s[done:start], -1})
		}
		dst = append(dst, segment{s[start:end], tok})
		done = end
	}
	if done < len(s) {
		dst = append(dst, segment{s[done:], -1})
	}
	return dst
}

// isWordChar approximates the Unicode \w of Rust's regex crate.
func isWordChar(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) ||
		unicode.Is(unicode.Pc, r) || unicode.Is(unicode.Nl, r) || r == 0x200C || r == 0x200D
}

func endsWithWordChar(s string) bool {
	r, n := utf8.DecodeLastRuneInString(s)
	return n > 0 && isWordChar(r)
}

func startsWithWordChar(s string) bool {
	r, n := utf8.DecodeRuneInString(s)
	return n > 0 && isWordChar(r)
}

// trailingSpace is the byte length of the whitespace run ending s.
func trailingSpace(s string) int {
	n := 0
	for len(s) > n {
		r, size := utf8.DecodeLastRuneInString(s[:len(s)-n])
		if !unicode.IsSpace(r) {
			break
		}
		n += size
	}
	return n
}

// leadingSpace is the byte length of the whitespace run starting s.
func leadingSpace(s string) int {
	n := 0
	for n < len(s) {
		r, size := utf8.DecodeRuneInString(s[n:])
		if !unicode.IsSpace(r) {
			break
		}
		n += size
	}
	return n
}
