package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"

	"github.com/tinyserve/tinyserve/llm/tokenizer"
)

// gpt2Vocab is the tokenizer metadata llama.cpp's "gpt2" BPE tokenizer
// reads from a GGUF file.
type gpt2Vocab struct {
	Tokens []string // each id's bytes in the byte-to-unicode form
	Types  []int32  // 1 normal, 3 control
	Merges []string // "left right" in rank order, byte-to-unicode form
}

// Token types as llama.cpp numbers them.
const (
	tokenNormal  = 1
	tokenControl = 3
)

// buildGPT2Vocab derives GPT-2's vocabulary and merge list from the r50k
// ranks tinyserve's tokenizer is built on. Ranks 0-255 are the single
// bytes; the token of rank r >= 256 was made by exactly one merge, found by
// running byte-level BPE on its bytes with the ranks below r only, which
// must leave exactly two parts.
func buildGPT2Vocab() (*gpt2Vocab, error) {
	ranks, err := tiktokenloader.NewOfflineLoader().LoadTiktokenBpe("r50k_base.tiktoken")
	if err != nil {
		return nil, fmt.Errorf("r50k ranks: %w", err)
	}
	n := tokenizer.GPT2EOS // ordinary tokens: ids 0..50255
	if len(ranks) != n {
		return nil, fmt.Errorf("r50k has %d ranks, want %d", len(ranks), n)
	}
	byID := make([][]byte, n)
	for s, id := range ranks {
		if id < 0 || id >= n || byID[id] != nil {
			return nil, fmt.Errorf("bad or duplicate rank %d", id)
		}
		byID[id] = []byte(s)
	}
	for id := range 256 {
		if len(byID[id]) != 1 {
			return nil, fmt.Errorf("rank %d is %q, not a single byte", id, byID[id])
		}
	}
	v := &gpt2Vocab{
		Tokens: make([]string, tokenizer.GPT2VocabSize),
		Types:  make([]int32, tokenizer.GPT2VocabSize),
	}
	for id, b := range byID {
		v.Tokens[id] = tokenizer.ByteLevelEncode(b)
		v.Types[id] = tokenNormal
	}
	v.Tokens[tokenizer.GPT2EOS] = tokenizer.GPT2EOSText
	v.Types[tokenizer.GPT2EOS] = tokenControl

	merges, err := mergesFromRanks(byID)
	if err != nil {
		return nil, err
	}
	v.Merges = merges
	return v, nil
}

// mergesFromRanks derives the merge list of a byte-level BPE vocabulary
// whose ids are its ranks (tiktoken's form): byID[id] are token id's bytes,
// ids 0-255 are the single bytes, and the token of rank r >= 256 was made
// by exactly one merge, found by running byte-level BPE on its bytes with
// the ranks below r only, which must leave exactly two parts. The merges
// come out in rank order, "left right" in the byte-to-unicode form, as
// merges.txt and tokenizer.json write them.
func mergesFromRanks(byID [][]byte) ([]string, error) {
	ranks := make(map[string]int, len(byID))
	for id, b := range byID {
		if id < 256 && len(b) != 1 {
			return nil, fmt.Errorf("rank %d is %q, not a single byte", id, b)
		}
		if _, dup := ranks[string(b)]; dup || len(b) == 0 {
			return nil, fmt.Errorf("rank %d (%q) is empty or repeated", id, b)
		}
		ranks[string(b)] = id
	}
	merges := make([]string, 0, len(byID)-256)
	var parts [][]byte
	for r := 256; r < len(byID); r++ {
		b := byID[r]
		parts = parts[:0]
		for i := range b {
			parts = append(parts, b[i:i+1])
		}
		for len(parts) > 2 {
			best, bestRank := -1, r
			for i := 0; i+1 < len(parts); i++ {
				// parts[i] and parts[i+1] are adjacent slices of b.
				pr, ok := ranks[string(b[offsetIn(b, parts[i]):offsetIn(b, parts[i+1])+len(parts[i+1])])]
				if ok && pr < bestRank {
					best, bestRank = i, pr
				}
			}
			if best < 0 {
				break
			}
			lo := offsetIn(b, parts[best])
			parts[best] = b[lo : offsetIn(b, parts[best+1])+len(parts[best+1])]
			parts = append(parts[:best+1], parts[best+2:]...)
		}
		if len(parts) != 2 {
			return nil, fmt.Errorf("token %d (%q): BPE with lower ranks leaves %d parts, want 2", r, b, len(parts))
		}
		merges = append(merges, tokenizer.ByteLevelEncode(parts[0])+" "+tokenizer.ByteLevelEncode(parts[1]))
	}
	return merges, nil
}

// offsetIn is the offset of sub (a subslice of b) in b.
func offsetIn(b, sub []byte) int { return cap(b) - cap(sub) }

// More token types as llama.cpp numbers them.
const (
	tokenUserDefined = 4
	tokenUnused      = 5
)

// The Qwen special tokens llama.cpp needs by id.
const (
	qwenEndOfText = 151643 // <|endoftext|>: bos and padding in llama.cpp's files
	qwenIMEnd     = 151645 // <|im_end|>: end of sequence (tokenizer_config.json's eos_token)
)

// buildQwenVocab is the built-in Qwen tokenizer (tokenizer.Qwen) as
// llama.cpp's "gpt2" BPE tokenizer with the "qwen2" pre-tokenizer reads it,
// for a model of vocabSize ids:
//
//   - tokens: each id's spelling in tokenizer.json (TokenString: the
//     byte-level form of a vocabulary entry, an added token's content);
//     the ids past the tokenizer's (151669 up to the model's 151936) are
//     "[PAD<id>]", of type unused, as llama.cpp's converter pads them;
//   - types: added tokens are control when special or when spelled
//     <|...|> (llama.cpp's converter treats those as special too), else
//     user-defined (<tool_call>, <think>, ...); the rest normal;
//   - merges: derived from the ranks (mergesFromRanks): the BPE
//     vocabulary's ids are its ranks, as in the tiktoken file Qwen's
//     vocabulary was made from (checked against tokenizer.json's own merge
//     list in the tests).
//
// The added tokens are read from the tokenizer's tokenizer_config.json
// (added_tokens_decoder), which lists every one with its special flag.
func buildQwenVocab(vocabSize int) (*gpt2Vocab, error) {
	tk, err := tokenizer.Qwen()
	if err != nil {
		return nil, err
	}
	n := tk.VocabSize()
	if vocabSize < n {
		return nil, fmt.Errorf("model vocabulary of %d ids is smaller than the Qwen tokenizer's %d", vocabSize, n)
	}
	var cfg struct {
		Added map[string]struct {
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens_decoder"`
	}
	if err := json.Unmarshal(tokenizer.QwenConfigJSON(), &cfg); err != nil {
		return nil, fmt.Errorf("qwen tokenizer_config.json: %w", err)
	}
	added := map[int]bool{} // id -> control
	for key, at := range cfg.Added {
		id, err := strconv.Atoi(key)
		if err != nil || id < 0 || id >= n {
			return nil, fmt.Errorf("qwen tokenizer_config.json: added token id %q out of range", key)
		}
		if got := tk.TokenString(id); got != at.Content {
			return nil, fmt.Errorf("qwen added token %d is %q in tokenizer_config.json, %q in tokenizer.json", id, at.Content, got)
		}
		added[id] = at.Special || strings.HasPrefix(at.Content, "<|") && strings.HasSuffix(at.Content, "|>")
	}
	if tk.TokenString(qwenEndOfText) != "<|endoftext|>" || tk.TokenString(qwenIMEnd) != "<|im_end|>" || tk.EOSTokenID() != qwenIMEnd {
		return nil, fmt.Errorf("qwen tokenizer: ids %d and %d are %q and %q (eos %d), want <|endoftext|> and <|im_end|> (eos)",
			qwenEndOfText, qwenIMEnd, tk.TokenString(qwenEndOfText), tk.TokenString(qwenIMEnd), tk.EOSTokenID())
	}
	v := &gpt2Vocab{Tokens: make([]string, vocabSize), Types: make([]int32, vocabSize)}
	var byID [][]byte // the BPE vocabulary: the ids below the first added token
	for id := range vocabSize {
		switch control, isAdded := added[id]; {
		case id >= n:
			v.Tokens[id], v.Types[id] = "[PAD"+strconv.Itoa(id)+"]", tokenUnused
		case isAdded && control:
			v.Tokens[id], v.Types[id] = tk.TokenString(id), tokenControl
		case isAdded:
			v.Tokens[id], v.Types[id] = tk.TokenString(id), tokenUserDefined
		default:
			s := tk.TokenString(id)
			b, ok := tokenizer.ByteLevelDecode(s)
			if !ok || s == "" {
				return nil, fmt.Errorf("qwen token %d (%q) is neither an added token nor in the byte-level alphabet", id, s)
			}
			if len(byID) != id {
				return nil, fmt.Errorf("qwen token %d is an ordinary token after an added one: the vocabulary is not ranks then added tokens", id)
			}
			byID = append(byID, b)
			v.Tokens[id], v.Types[id] = s, tokenNormal
		}
	}
	if v.Merges, err = mergesFromRanks(byID); err != nil {
		return nil, fmt.Errorf("qwen merges: %w", err)
	}
	return v, nil
}
