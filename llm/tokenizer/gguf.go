package tokenizer

import (
	"encoding/json"
	"fmt"

	"github.com/tinyserve/tinyserve/llm/gguf"
)

// The token types of tokenizer.ggml.token_type (llama.h's enum
// llama_token_type).
const (
	GGUFTokenNormal      = 1
	GGUFTokenUnknown     = 2
	GGUFTokenControl     = 3
	GGUFTokenUserDefined = 4
	GGUFTokenUnused      = 5
	GGUFTokenByte        = 6
)

// ggufPre maps tokenizer.ggml.pre, llama.cpp's name for a pre-tokenizer,
// to the Hugging Face pre_tokenizer and normalizer its tokenizer.json has,
// and whether its BPE model ignores merges (takes a whole word found in
// the vocabulary as one token, as Llama 3's does).
var ggufPre = map[string]struct {
	pre          any
	normalizer   any
	ignoreMerges bool
}{
	"gpt-2":     {pre: byteLevelPre(true)},
	"qwen2":     {pre: splitPre(qwenPattern), normalizer: map[string]any{"type": "NFC"}},
	"llama-bpe": {pre: splitPre(llama3Pattern), ignoreMerges: true},
	"llama3":    {pre: splitPre(llama3Pattern), ignoreMerges: true},
	"llama-v3":  {pre: splitPre(llama3Pattern), ignoreMerges: true},
}

func byteLevelPre(useRegex bool) map[string]any {
	return map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": useRegex}
}

func splitPre(pattern string) map[string]any {
	return map[string]any{"type": "Sequence", "pretokenizers": []any{
		map[string]any{"type": "Split", "pattern": map[string]any{"Regex": pattern}, "behavior": "Isolated", "invert": false},
		byteLevelPre(false),
	}}
}

// FromGGUF builds the tokenizer a GGUF file's metadata describes:
// tokenizer.ggml.model "gpt2" (byte-level BPE) with its tokens, merges and
// token types, tokenizer.ggml.pre naming the pre-tokenizer ("gpt-2",
// "qwen2", "llama-bpe"/"llama3"), BOS and EOS by id and add_bos_token. It
// is assembled as the tokenizer.json Hugging Face has for the same
// vocabulary and parsed by ParseHF, so both tokenize alike: normal tokens
// form the BPE vocabulary, control tokens are special added tokens,
// user-defined ones plain added tokens, unused ones (llama.cpp's padding
// of a vocabulary to the model's rows) are left out. Another model or
// pre-tokenizer is refused by name.
func FromGGUF(f *gguf.File) (*HFTokenizer, error) {
	t, err := fromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: gguf: %w", err)
	}
	return t, nil
}

func fromGGUF(f *gguf.File) (*HFTokenizer, error) {
	model, err := f.String("tokenizer.ggml.model")
	if err != nil {
		return nil, err
	}
	if model != "gpt2" {
		return nil, fmt.Errorf("%w: tokenizer.ggml.model %q (tinyserve reads byte-level BPE, \"gpt2\")", ErrUnsupported, model)
	}
	pre, err := f.String("tokenizer.ggml.pre")
	if err != nil {
		return nil, err
	}
	p, ok := ggufPre[pre]
	if !ok {
		return nil, fmt.Errorf("%w: tokenizer.ggml.pre %q (supported: gpt-2, qwen2, llama-bpe, llama3)", ErrUnsupported, pre)
	}
	tokens, err := f.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return nil, err
	}
	var types []int64
	if f.Has("tokenizer.ggml.token_type") {
		if types, err = f.Ints("tokenizer.ggml.token_type"); err != nil {
			return nil, err
		}
		if len(types) != len(tokens) {
			return nil, fmt.Errorf("tokenizer.ggml.token_type has %d entries for %d tokens", len(types), len(tokens))
		}
	}
	var merges []string
	if f.Has("tokenizer.ggml.merges") {
		if merges, err = f.Strings("tokenizer.ggml.merges"); err != nil {
			return nil, err
		}
	}
	vocab := make(map[string]int, len(tokens))
	var added []map[string]any
	for id, tok := range tokens {
		typ := int64(GGUFTokenNormal)
		if types != nil {
			typ = types[id]
		}
		switch typ {
		case GGUFTokenNormal:
			if _, dup := vocab[tok]; dup {
				return nil, fmt.Errorf("tokenizer.ggml.tokens: token %d (%q) appears twice", id, shorten(tok))
			}
			vocab[tok] = id
		case GGUFTokenControl, GGUFTokenUserDefined:
			added = append(added, map[string]any{"id": id, "content": tok, "single_word": false, "lstrip": false,
				"rstrip": false, "normalized": false, "special": typ == GGUFTokenControl})
		case GGUFTokenUnused:
		default:
			return nil, fmt.Errorf("%w: token %d (%q) has tokenizer.ggml.token_type %d (normal, control, user-defined and unused are read)",
				ErrUnsupported, id, shorten(tok), typ)
		}
	}
	opts := HFOptions{}
	special := func(key string) (string, error) {
		if !f.Has(key) {
			return "", nil
		}
		id, err := f.Int(key)
		if err != nil {
			return "", err
		}
		if id < 0 || id >= int64(len(tokens)) {
			return "", fmt.Errorf("%s %d is not a token id (%d tokens)", key, id, len(tokens))
		}
		return tokens[id], nil
	}
	if opts.EOSToken, err = special("tokenizer.ggml.eos_token_id"); err != nil {
		return nil, err
	}
	if opts.BOSToken, err = special("tokenizer.ggml.bos_token_id"); err != nil {
		return nil, err
	}
	for key, dst := range map[string]*bool{"tokenizer.ggml.add_bos_token": &opts.AddBOSToken, "tokenizer.ggml.add_eos_token": &opts.AddEOSToken} {
		if f.Has(key) {
			if *dst, err = f.Bool(key); err != nil {
				return nil, err
			}
		}
	}
	doc := map[string]any{
		"version":        "1.0",
		"added_tokens":   added,
		"normalizer":     p.normalizer,
		"pre_tokenizer":  p.pre,
		"post_processor": nil,
		"decoder":        byteLevelPre(true),
		"model": map[string]any{"type": "BPE", "vocab": vocab, "merges": merges, "ignore_merges": p.ignoreMerges,
			"byte_fallback": false, "fuse_unk": false},
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	t, err := ParseHF(data, opts)
	if err != nil {
		return nil, fmt.Errorf("tokenizer.ggml.*: %w", err)
	}
	return t, nil
}

// LoadGGUF reads the tokenizer of the GGUF file at path (see FromGGUF).
func LoadGGUF(path string) (*HFTokenizer, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	defer f.Close()
	t, err := FromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// GGUFChatTemplate is what a GGUF file says of its chat template: the
// template's source (tokenizer.chat_template, "" when it has none) and the
// contents of its BOS and EOS tokens, which templates refer to as
// bos_token and eos_token.
type GGUFChatTemplate struct {
	Source   string
	BOS, EOS string
}

// ReadGGUFChatTemplate reads the chat template of the GGUF file at path.
func ReadGGUFChatTemplate(path string) (GGUFChatTemplate, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return GGUFChatTemplate{}, err
	}
	defer f.Close()
	var ct GGUFChatTemplate
	if f.Has("tokenizer.chat_template") {
		if ct.Source, err = f.String("tokenizer.chat_template"); err != nil {
			return GGUFChatTemplate{}, err
		}
	}
	tokens, _ := f.Strings("tokenizer.ggml.tokens")
	for key, dst := range map[string]*string{"tokenizer.ggml.bos_token_id": &ct.BOS, "tokenizer.ggml.eos_token_id": &ct.EOS} {
		if id, err := f.Int(key); err == nil && id >= 0 && id < int64(len(tokens)) {
			*dst = tokens[id]
		}
	}
	return ct, nil
}
