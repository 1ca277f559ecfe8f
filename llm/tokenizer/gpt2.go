package tokenizer

import (
	"fmt"

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
	tokens [][]byte // bytes of each id, for decoding
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
	return &GPT2Tokenizer{enc: enc, tokens: tokens}, nil
}

// Encode implements llm.Tokenizer. Only <|endoftext|> is special; with
// allowSpecial false it is encoded as the ordinary text it is made of, as
// tiktoken's encode_ordinary does.
func (t *GPT2Tokenizer) Encode(text string, allowSpecial bool) []int {
	text = validText(text)
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
	return lossyUTF8(b)
}

// NewDecoder implements llm.Tokenizer.
func (t *GPT2Tokenizer) NewDecoder(skipSpecial bool) llm.Decoder {
	return llm.NewByteDecoder(func(id int) []byte { return t.tokenBytes(id, skipSpecial) })
}

func (t *GPT2Tokenizer) tokenBytes(id int, skipSpecial bool) []byte {
	if id < 0 || id >= len(t.tokens) || (skipSpecial && id == GPT2EOS) {
		return nil
	}
	return t.tokens[id]
}

// VocabSize implements llm.Tokenizer: 50257.
func (t *GPT2Tokenizer) VocabSize() int { return GPT2VocabSize }

// EOSTokenID implements llm.Tokenizer: 50256, <|endoftext|>.
func (t *GPT2Tokenizer) EOSTokenID() int { return GPT2EOS }

// IsSpecial implements llm.Tokenizer: only <|endoftext|> is special.
func (t *GPT2Tokenizer) IsSpecial(id int) bool { return id == GPT2EOS }
