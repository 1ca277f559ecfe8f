package main

import (
	"fmt"

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
		Merges: make([]string, 0, n-256),
	}
	for id, b := range byID {
		v.Tokens[id] = tokenizer.ByteLevelEncode(b)
		v.Types[id] = tokenNormal
	}
	v.Tokens[tokenizer.GPT2EOS] = tokenizer.GPT2EOSText
	v.Types[tokenizer.GPT2EOS] = tokenControl

	var parts [][]byte
	for r := 256; r < n; r++ {
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
		v.Merges = append(v.Merges, tokenizer.ByteLevelEncode(parts[0])+" "+tokenizer.ByteLevelEncode(parts[1]))
	}
	return v, nil
}

// offsetIn is the offset of sub (a subslice of b) in b.
func offsetIn(b, sub []byte) int { return cap(b) - cap(sub) }
