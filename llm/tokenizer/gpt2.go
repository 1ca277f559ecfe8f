package tokenizer

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"

	"github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"

	"github.com/tinyserve/tinyserve/llm"
)

// GPT-2's vocabulary: 50,256 BPE tokens and one special token.
const (
	// GPT2VocabSize is the number of GPT-2 token ids, <|endoftext|> included.
	GPT2VocabSize = 50257
	// GPT2EOS is the id of <|endoftext|>, GPT-2's only special token.
	GPT2EOS = 50256
	// GPT2EOSText is how <|endoftext|> is written in text.
	GPT2EOSText = "<|endoftext|>"
)

// gpt2Pattern is the r50k_base pre-tokenizer regex (GPT-2's encoder.py).
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// GPT2Tokenizer is GPT-2's byte-level BPE tokenizer (OpenAI's r50k_base
// encoding). It is safe for concurrent use.
type GPT2Tokenizer struct {
	enc    *tiktoken.Tiktoken
	tokens [][]byte       // bytes of each id, for decoding
	ranks  map[string]int // token bytes -> id (read-only, shared with enc)
	split  *regexSplit    // the r50k pre-tokenizer, for the long-input path
}

var _ llm.Tokenizer = (*GPT2Tokenizer)(nil)

// GPT2 returns GPT-2's tokenizer, built from the r50k_base ranks embedded in
// the binary; it reads no files and never touches the network.
//
// tiktoken-go's GetEncoding would go through its package-level loader and
// cache; building the encoding from the offline loader's ranks directly keeps
// tinyserve free of that global state (and EncodingForModel("gpt2") does not
// work in that library anyway).
func GPT2() (*GPT2Tokenizer, error) {
	ranks, err := tiktokenloader.NewOfflineLoader().LoadTiktokenBpe("r50k_base.tiktoken")
	if err != nil {
		return nil, fmt.Errorf("gpt2 tokenizer: embedded r50k_base ranks: %w", err)
	}
	if len(ranks) != GPT2EOS {
		return nil, fmt.Errorf("gpt2 tokenizer: embedded r50k_base has %d ranks, want %d", len(ranks), GPT2EOS)
	}
	special := map[string]int{GPT2EOSText: GPT2EOS}
	core, err := tiktoken.NewCoreBPE(ranks, special, gpt2Pattern)
	if err != nil {
		return nil, fmt.Errorf("gpt2 tokenizer: %w", err)
	}
	enc := tiktoken.NewTiktoken(core, &tiktoken.Encoding{
		Name:           "r50k_base",
		PatStr:         gpt2Pattern,
		MergeableRanks: ranks,
		SpecialTokens:  special,
		ExplicitNVocab: GPT2VocabSize,
	}, map[string]any{GPT2EOSText: true})
	tokens := make([][]byte, GPT2VocabSize)
	for s, id := range ranks {
		if id < 0 || id >= GPT2EOS || tokens[id] != nil {
			return nil, fmt.Errorf("gpt2 tokenizer: bad or duplicate rank %d in embedded r50k_base", id)
		}
		tokens[id] = []byte(s)
	}
	tokens[GPT2EOS] = []byte(GPT2EOSText)
	split := &regexSplit{re: regexp2.MustCompile(gpt2Pattern, regexp2.None), fast: fastGPT2, behavior: behaviorIsolated}
	return &GPT2Tokenizer{enc: enc, tokens: tokens, ranks: ranks, split: split}, nil
}

// Encode implements llm.Tokenizer. Only <|endoftext|> is special; with
// allowSpecial false it is encoded as the ordinary text it is made of, as
// tiktoken's encode_ordinary does.
//
// Input that tiktoken-go would take quadratic time over (a pre-tokenized
// piece of hundreds of bytes, such as a long word or number, or many
// <|endoftext|> markers) is encoded by an equivalent heap-based merge
// instead, so a hostile prompt cannot stall the caller; the ids are the same.
func (t *GPT2Tokenizer) Encode(text string, allowSpecial bool) []int {
	text = validText(text)
	if needsLinearPath(text, allowSpecial) {
		return t.encodeLinear(text, allowSpecial)
	}
	var ids []int
	if allowSpecial {
		ids = t.enc.Encode(text, []string{"all"}, nil)
	} else {
		ids = t.enc.EncodeOrdinary(text)
	}
	if ids == nil {
		ids = []int{}
	}
	return ids
}

// Decode implements llm.Tokenizer. Ids outside the vocabulary are skipped.
func (t *GPT2Tokenizer) Decode(ids []int, skipSpecial bool) string {
	var b []byte
	for _, id := range ids {
		b = append(b, t.tokenBytes(id, skipSpecial)...)
	}
	return LossyUTF8(b)
}

// NewDecoder implements llm.Tokenizer.
func (t *GPT2Tokenizer) NewDecoder(skipSpecial bool) llm.Decoder {
	return NewByteDecoder(func(id int) []byte { return t.tokenBytes(id, skipSpecial) })
}

func (t *GPT2Tokenizer) tokenBytes(id int, skipSpecial bool) []byte {
	if id < 0 || id >= len(t.tokens) || (skipSpecial && id == GPT2EOS) {
		return nil
	}
	return t.tokens[id]
}

// TokenString returns a token as the vocabulary spells it, as Hugging
// Face's convert_ids_to_tokens does: its bytes in the byte-level alphabet
// ("Ġworld" for " world", so a token holding part of a UTF-8 character
// still names its bytes), and <|endoftext|> as itself; "" for an id
// outside the vocabulary.
func (t *GPT2Tokenizer) TokenString(id int) string {
	switch {
	case id == GPT2EOS:
		return GPT2EOSText
	case id < 0 || id >= len(t.tokens):
		return ""
	}
	return ByteLevelEncode(t.tokens[id])
}

// AddSpecialTokens returns a copy of ids: GPT-2 has no template tokens
// (Hugging Face's GPT-2 tokenizer adds nothing with add_special_tokens=True
// either). It exists so that every tokenizer of this package offers the
// same way to add them.
func (t *GPT2Tokenizer) AddSpecialTokens(ids []int) []int {
	return append(make([]int, 0, len(ids)), ids...)
}

// BOSTokenID returns -1: GPT-2 puts no token in front of a sequence.
func (t *GPT2Tokenizer) BOSTokenID() int { return -1 }

// VocabSize implements llm.Tokenizer: 50257.
func (t *GPT2Tokenizer) VocabSize() int { return GPT2VocabSize }

// EOSTokenID implements llm.Tokenizer: 50256, <|endoftext|>.
func (t *GPT2Tokenizer) EOSTokenID() int { return GPT2EOS }

// IsSpecial implements llm.Tokenizer: only <|endoftext|> is special.
func (t *GPT2Tokenizer) IsSpecial(id int) bool { return id == GPT2EOS }

// Limits beyond which Encode leaves tiktoken-go: its byte-pair merge is
// quadratic in the length of a piece, and its special-token search copies the
// rest of the text at every marker.
const (
	maxTiktokenRun     = 256 // bytes in one run of letters, digits or symbols
	maxTiktokenSpecial = 16  // <|endoftext|> markers in one text
)

// needsLinearPath reports whether text has a run of same-class characters
// (the only way r50k's regex makes a long piece) longer than maxTiktokenRun,
// or too many special markers to be searched cheaply. Whitespace counts
// too: a run of it is one piece (\s+(?!\S)) whose pairs merge ("\n\n" is
// a token), so 100k newlines took seconds on the other path.
func needsLinearPath(text string, allowSpecial bool) bool {
	if len(text) <= maxTiktokenRun {
		return false
	}
	if allowSpecial && strings.Count(text, GPT2EOSText) > maxTiktokenSpecial {
		return true
	}
	run, class := 0, -1
	for _, r := range text {
		if c := runeClass(r); c != class {
			run, class = 0, c
		}
		run += utf8.RuneLen(r)
		if run > maxTiktokenRun {
			return true
		}
	}
	return false
}

// runeClass groups runes the way r50k's regex does: 0 whitespace, 1
// letters, 2 numbers, 3 the rest.
func runeClass(r rune) int {
	switch {
	case unicode.IsSpace(r):
		return 0
	case unicode.IsLetter(r):
		return 1
	case unicode.IsNumber(r):
		return 2
	default:
		return 3
	}
}

// encodeLinear is tiktoken's algorithm with a heap: the same pre-tokenizer,
// and for each piece the lowest-ranked adjacent pair is joined first,
// leftmost on ties, as tiktoken's byte-pair merge does.
func (t *GPT2Tokenizer) encodeLinear(text string, allowSpecial bool) []int {
	ids := []int{}
	for {
		seg, rest, found := text, "", false
		if allowSpecial {
			seg, rest, found = strings.Cut(text, GPT2EOSText)
		}
		for _, piece := range t.split.split(nil, seg) {
			if id, ok := t.ranks[piece]; ok {
				ids = append(ids, id)
				continue
			}
			ids = rankMerge(ids, piece, t.ranks)
		}
		if !found {
			return ids
		}
		ids = append(ids, GPT2EOS)
		text = rest
	}
}

// rankMerge appends the BPE ids of piece under tiktoken's rule: the merge
// of two adjacent parts has the rank of their joined bytes. Parts are byte
// ranges of piece, so looking a join up allocates nothing.
func rankMerge(dst []int, piece string, ranks map[string]int) []int {
	type part struct{ start, end, next, prev int }
	parts := make([]part, len(piece))
	for i := range parts {
		parts[i] = part{i, i + 1, i + 1, i - 1}
	}
	parts[len(parts)-1].next = -1
	rankOf := func(i int) (int, bool) {
		j := parts[i].next
		if j < 0 {
			return 0, false
		}
		r, ok := ranks[piece[parts[i].start:parts[j].end]]
		return r, ok
	}
	var h mergeHeap
	for i := range parts {
		if r, ok := rankOf(i); ok {
			h.push(candidate{rank: int32(r), pos: int32(i), id: int32(parts[parts[i].next].end)})
		}
	}
	for len(h) > 0 {
		c := h.pop()
		i := int(c.pos)
		// Stale when the part was absorbed or its right neighbour changed;
		// id holds the end of the join the candidate was made for.
		if parts[i].start < 0 || parts[i].next < 0 || parts[parts[i].next].end != int(c.id) {
			continue
		}
		j := parts[i].next
		parts[i].end = parts[j].end
		parts[i].next = parts[j].next
		parts[j].start = -1
		if parts[i].next >= 0 {
			parts[parts[i].next].prev = i
		}
		if p := parts[i].prev; p >= 0 {
			if r, ok := rankOf(p); ok {
				h.push(candidate{rank: int32(r), pos: int32(p), id: int32(parts[i].end)})
			}
		}
		if r, ok := rankOf(i); ok {
			h.push(candidate{rank: int32(r), pos: int32(i), id: int32(parts[parts[i].next].end)})
		}
	}
	for i := 0; i >= 0; i = parts[i].next {
		dst = append(dst, ranks[piece[parts[i].start:parts[i].end]])
	}
	return dst
}
