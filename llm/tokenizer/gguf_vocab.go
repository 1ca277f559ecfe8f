package tokenizer

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"

	"github.com/tinyserve/tinyserve/llm/gguf"
)

// GGUFVocab is a byte-level BPE vocabulary as llama.cpp's "gpt2" tokenizer
// reads it from a GGUF file's tokenizer.ggml.* metadata: what a converter
// writes (KVs) and FromGGUF reads back.
type GGUFVocab struct {
	// Pre is tokenizer.ggml.pre: gpt-2, qwen2, llama-bpe.
	Pre string
	// Tokens are each id's spelling: a vocabulary entry in the byte-level
	// alphabet, an added token's content, "[PAD<id>]" for padding.
	Tokens []string
	// Types are the GGUFToken* type of each id.
	Types []int32
	// Merges are "left right" in rank order, in the byte-level alphabet.
	Merges []string
	// BOS, EOS and Pad are token ids, -1 for none.
	BOS, EOS, Pad int
	// AddBOS is tokenizer.ggml.add_bos_token.
	AddBOS bool
}

// KVs is the vocabulary's metadata.
func (v *GGUFVocab) KVs() []gguf.KV {
	kv := []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: "gpt2"},
		{Key: "tokenizer.ggml.pre", Value: v.Pre},
		{Key: "tokenizer.ggml.tokens", Value: v.Tokens},
		{Key: "tokenizer.ggml.token_type", Value: v.Types},
		{Key: "tokenizer.ggml.merges", Value: v.Merges},
	}
	for _, id := range []struct {
		key string
		id  int
	}{{"bos", v.BOS}, {"eos", v.EOS}, {"padding", v.Pad}} {
		if id.id >= 0 {
			kv = append(kv, gguf.KV{Key: "tokenizer.ggml." + id.key + "_token_id", Value: uint32(id.id)})
		}
	}
	return append(kv, gguf.KV{Key: "tokenizer.ggml.add_bos_token", Value: v.AddBOS})
}

// GPT2GGUFVocab derives GPT-2's vocabulary and merge list from the r50k
// ranks the built-in GPT-2 tokenizer is built on (see mergesFromRanks),
// with <|endoftext|> as BOS and EOS, as llama.cpp's converter writes
// GPT-2.
func GPT2GGUFVocab() (*GGUFVocab, error) {
	ranks, err := tiktokenloader.NewOfflineLoader().LoadTiktokenBpe("r50k_base.tiktoken")
	if err != nil {
		return nil, fmt.Errorf("r50k ranks: %w", err)
	}
	n := GPT2EOS // ordinary tokens: ids 0..50255
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
	v := &GGUFVocab{Pre: "gpt-2", Tokens: make([]string, GPT2VocabSize), Types: make([]int32, GPT2VocabSize), BOS: GPT2EOS, EOS: GPT2EOS, Pad: -1}
	for id, b := range byID {
		v.Tokens[id], v.Types[id] = ByteLevelEncode(b), GGUFTokenNormal
	}
	v.Tokens[GPT2EOS], v.Types[GPT2EOS] = GPT2EOSText, GGUFTokenControl
	if v.Merges, err = mergesFromRanks(byID); err != nil {
		return nil, err
	}
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
	merges := make([]string, 0, max(0, len(byID)-256))
	var parts [][2]int // [start, end) in the token's bytes
	for r := 256; r < len(byID); r++ {
		b := byID[r]
		parts = parts[:0]
		for i := range b {
			parts = append(parts, [2]int{i, i + 1})
		}
		for len(parts) > 2 {
			best, bestRank := -1, r
			for i := 0; i+1 < len(parts); i++ {
				if pr, ok := ranks[string(b[parts[i][0]:parts[i+1][1]])]; ok && pr < bestRank {
					best, bestRank = i, pr
				}
			}
			if best < 0 {
				break
			}
			parts[best][1] = parts[best+1][1]
			parts = append(parts[:best+1], parts[best+2:]...)
		}
		if len(parts) != 2 {
			return nil, fmt.Errorf("token %d (%q): BPE with lower ranks leaves %d parts, want 2", r, b, len(parts))
		}
		merges = append(merges, ByteLevelEncode(b[:parts[0][1]])+" "+ByteLevelEncode(b[parts[1][0]:]))
	}
	return merges, nil
}

// The Qwen special tokens llama.cpp needs by id.
const (
	qwenEndOfText = 151643 // <|endoftext|>: bos and padding in llama.cpp's files
	qwenIMEnd     = 151645 // <|im_end|>: end of sequence (tokenizer_config.json's eos_token)
)

// QwenGGUFVocab is the built-in Qwen tokenizer (Qwen) as llama.cpp's
// converter writes it for a model of vocabSize ids (Qwen2.5, Qwen3):
// tokenizer.json's vocabulary and merges; added tokens control when
// special or spelled <|...|> (llama.cpp's converter treats those as
// special too), else user-defined (<tool_call>, <think>, ...); the ids past
// the tokenizer's (151669 up to the model's 151936) "[PAD<id>]" of type
// unused. BOS and padding are <|endoftext|>, EOS <|im_end|>.
func QwenGGUFVocab(vocabSize int) (*GGUFVocab, error) {
	data, err := qwenTokenizerJSON()
	if err != nil {
		return nil, fmt.Errorf("qwen tokenizer: %w", err)
	}
	v, err := hfGGUFVocab(data, QwenConfigJSON(), "qwen2", vocabSize)
	if err != nil {
		return nil, fmt.Errorf("qwen tokenizer: %w", err)
	}
	v.BOS, v.EOS, v.Pad = qwenEndOfText, qwenIMEnd, qwenEndOfText
	if v.Tokens[qwenEndOfText] != "<|endoftext|>" || v.Tokens[qwenIMEnd] != "<|im_end|>" {
		return nil, fmt.Errorf("qwen tokenizer: ids %d and %d are %q and %q, want <|endoftext|> and <|im_end|>",
			qwenEndOfText, qwenIMEnd, v.Tokens[qwenEndOfText], v.Tokens[qwenIMEnd])
	}
	return v, nil
}

// HFGGUFVocab is the vocabulary of a Hugging Face byte-level BPE
// tokenizer.json (with the tokenizer_config.json beside it, when there is
// one, for BOS, EOS and add_bos_token) as GGUF metadata with pre-tokenizer
// pre (see FromGGUF), padded with unused tokens to vocabSize ids.
func HFGGUFVocab(path, pre string, vocabSize int) (*GGUFVocab, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	cfg, err := os.ReadFile(strings.TrimSuffix(path, "tokenizer.json") + "tokenizer_config.json")
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	v, err := hfGGUFVocab(data, cfg, pre, vocabSize)
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", path, err)
	}
	return v, nil
}

func hfGGUFVocab(data, cfgData []byte, pre string, vocabSize int) (*GGUFVocab, error) {
	if _, ok := ggufPre[pre]; !ok {
		return nil, fmt.Errorf("%w: pre-tokenizer %q", ErrUnsupported, pre)
	}
	var f hfFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, err
	}
	if f.Model == nil || f.Model.Type != "BPE" {
		return nil, fmt.Errorf("%w: not a BPE tokenizer.json", ErrUnsupported)
	}
	n := 0
	for _, id := range f.Model.Vocab {
		n = max(n, id+1)
	}
	for _, at := range f.AddedTokens {
		if at.ID != nil {
			n = max(n, *at.ID+1)
		}
	}
	if vocabSize < n {
		return nil, fmt.Errorf("model vocabulary of %d ids is smaller than the tokenizer's %d", vocabSize, n)
	}
	v := &GGUFVocab{Pre: pre, Tokens: make([]string, vocabSize), Types: make([]int32, vocabSize), BOS: -1, EOS: -1, Pad: -1}
	for id := range v.Tokens {
		v.Tokens[id], v.Types[id] = "[PAD"+strconv.Itoa(id)+"]", GGUFTokenUnused
	}
	for tok, id := range f.Model.Vocab {
		v.Tokens[id], v.Types[id] = tok, GGUFTokenNormal
	}
	for _, at := range f.AddedTokens {
		if at.ID == nil {
			continue
		}
		typ := int32(GGUFTokenUserDefined)
		if at.Special || strings.HasPrefix(at.Content, "<|") && strings.HasSuffix(at.Content, "|>") {
			typ = GGUFTokenControl
		}
		v.Tokens[*at.ID], v.Types[*at.ID] = at.Content, typ
	}
	pairs, err := parseMerges(f.Model.Merges)
	if err != nil {
		return nil, err
	}
	for _, p := range pairs {
		if strings.Contains(p[0], " ") || strings.Contains(p[1], " ") {
			return nil, fmt.Errorf("%w: merge %q %q has a space, which GGUF's \"left right\" merges cannot hold", ErrUnsupported, p[0], p[1])
		}
		v.Merges = append(v.Merges, p[0]+" "+p[1])
	}
	if len(cfgData) > 0 {
		opts, err := parseHFConfig(cfgData)
		if err != nil {
			return nil, fmt.Errorf("tokenizer_config.json: %w", err)
		}
		for i, tok := range v.Tokens {
			if tok == opts.BOSToken && v.BOS < 0 {
				v.BOS = i
			}
			if tok == opts.EOSToken && v.EOS < 0 {
				v.EOS = i
			}
		}
		v.AddBOS = opts.AddBOSToken
	}
	// A post_processor that adds BOS (Llama 3's TemplateProcessing) means
	// add_bos_token, as llama.cpp's converter reads it.
	if tmpl, err := parsePostProcessor(f.PostProcessor); err == nil && !tmpl.empty() {
		v.AddBOS = true
		if b := tmpl.bos(); b >= 0 && v.BOS < 0 {
			v.BOS = b
		}
	}
	return v, nil
}

// qwenTokenizerJSON is the built-in Qwen tokenizer.json, decompressed.
func qwenTokenizerJSON() ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(qwenTokenizerGz))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}
