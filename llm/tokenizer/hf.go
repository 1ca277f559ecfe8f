package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tinyserve/tinyserve/llm"
)

// ErrUnsupported reports a tokenizer.json component (normalizer,
// pre-tokenizer, model, decoder or option) this package does not implement.
// The wrapping error names the component.
var ErrUnsupported = errors.New("unsupported tokenizer.json component")

// HFOptions are the settings of a Hugging Face tokenizer that tokenizer.json
// itself does not carry.
type HFOptions struct {
	// EOSToken is the content of the end-of-sequence token (tokenizer.json
	// does not say which token ends a sequence; tokenizer_config.json's
	// eos_token does). Empty means: guess from common names
	// (<|endoftext|>, <|end_of_text|>, </s>, <eos>), else none.
	EOSToken string
	// BOSToken is the content of the beginning-of-sequence token
	// (tokenizer_config.json's bos_token). It is used only with
	// AddBOSToken; empty means none.
	BOSToken string
	// AddBOSToken and AddEOSToken are tokenizer_config.json's
	// add_bos_token and add_eos_token: AddSpecialTokens puts BOSToken in
	// front and EOSToken behind a sequence. They apply only when the
	// tokenizer.json post_processor adds nothing itself; see ParseHF.
	AddBOSToken, AddEOSToken bool
}

// HFTokenizer is a Hugging Face byte-level BPE tokenizer read from a
// tokenizer.json. It is safe for concurrent use.
//
// Encode follows the Rust tokenizers library's encode with
// add_special_tokens=false: added tokens are cut out of the raw text first,
// the rest is normalized, pre-tokenized and run through BPE. No template
// tokens (BOS) are added: AddSpecialTokens adds them afterwards, so that a
// prompt is tokenized the same way whether or not a chat template already
// wrote its BOS. Truncation and padding settings are ignored, as
// transformers' encode ignores them.
type HFTokenizer struct {
	added      []addedToken
	rawTrie    *tokenTrie // added tokens matched on raw text
	normTrie   *tokenTrie // added tokens matched on normalized text
	normalizer normalizer // nil when the file has none
	preTok     []preTokenizer
	model      *bpeModel
	tokens     [][]byte // decoded bytes of every id (nil for gaps)
	// spelled holds the ids whose text in the file is not their bytes in
	// the byte-level alphabet: added tokens, and vocabulary entries outside
	// the alphabet (TokenString).
	spelled map[int]string
	special []bool
	eos     int
	// tmpl is what AddSpecialTokens puts around a sequence: the
	// post_processor's single template, or tokenizer_config.json's
	// add_bos_token/add_eos_token when that adds nothing.
	tmpl template
}

var _ llm.Tokenizer = (*HFTokenizer)(nil)

// hfFile is the part of tokenizer.json this package reads.
type hfFile struct {
	AddedTokens []struct {
		ID         *int   `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
		Normalized *bool  `json:"normalized"`
		Special    bool   `json:"special"`
	} `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         *struct {
		Type                    string          `json:"type"`
		Dropout                 *float64        `json:"dropout"`
		UnkToken                *string         `json:"unk_token"`
		ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
		FuseUnk                 bool            `json:"fuse_unk"`
		ByteFallback            bool            `json:"byte_fallback"`
		IgnoreMerges            bool            `json:"ignore_merges"`
		Vocab                   map[string]int  `json:"vocab"`
		Merges                  json.RawMessage `json:"merges"`
	} `json:"model"`
}

// LoadHF reads a tokenizer.json file. When a tokenizer_config.json sits
// beside it, its eos_token names the end-of-sequence token, and its
// bos_token, add_bos_token and add_eos_token fill the rest of HFOptions.
func LoadHF(path string) (*HFTokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	opts, err := hfOptionsBeside(path)
	if err != nil {
		return nil, err
	}
	t, err := ParseHF(data, opts)
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", path, err)
	}
	return t, nil
}

// hfOptionsBeside reads the HFOptions from the tokenizer_config.json next
// to a tokenizer.json, if there is one.
func hfOptionsBeside(path string) (HFOptions, error) {
	cfgPath := filepath.Join(filepath.Dir(path), "tokenizer_config.json")
	data, err := os.ReadFile(cfgPath)
	if errors.Is(err, os.ErrNotExist) {
		return HFOptions{}, nil
	}
	if err != nil {
		return HFOptions{}, fmt.Errorf("tokenizer: %w", err)
	}
	opts, err := parseHFConfig(data)
	if err != nil {
		return HFOptions{}, fmt.Errorf("tokenizer: %s: %w", cfgPath, err)
	}
	return opts, nil
}

// parseHFConfig reads the HFOptions from a tokenizer_config.json.
func parseHFConfig(data []byte) (HFOptions, error) {
	var cfg struct {
		EOS         json.RawMessage `json:"eos_token"`
		BOS         json.RawMessage `json:"bos_token"`
		AddBOSToken *bool           `json:"add_bos_token"`
		AddEOSToken *bool           `json:"add_eos_token"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return HFOptions{}, err
	}
	return HFOptions{
		EOSToken:    configToken(cfg.EOS),
		BOSToken:    configToken(cfg.BOS),
		AddBOSToken: cfg.AddBOSToken != nil && *cfg.AddBOSToken,
		AddEOSToken: cfg.AddEOSToken != nil && *cfg.AddEOSToken,
	}, nil
}

// configToken reads a token setting of tokenizer_config.json, either a
// string or an AddedToken object with "content"; "" for null or anything
// else.
func configToken(raw json.RawMessage) string {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	var obj struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err == nil {
		return obj.Content
	}
	return ""
}

// ParseHF builds a tokenizer from the contents of a tokenizer.json. The
// post_processor gives the template AddSpecialTokens applies; when it adds
// nothing (Qwen's ByteLevel, GPT-2's), opts.AddBOSToken and AddEOSToken
// decide instead, as transformers' LlamaTokenizerFast would. A
// post_processor that adds tokens wins over them, so a BOS is never added
// twice.
func ParseHF(data []byte, opts HFOptions) (*HFTokenizer, error) {
	var f hfFile
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("parsing tokenizer.json: %w", err)
	}
	if f.Model == nil {
		return nil, errors.New("tokenizer.json has no model")
	}
	t := &HFTokenizer{eos: -1}
	var err error
	if t.normalizer, err = parseNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	if t.preTok, err = parsePreTokenizer(f.PreTokenizer); err != nil {
		return nil, err
	}
	tmpl, err := parsePostProcessor(f.PostProcessor)
	if err != nil {
		return nil, err
	}
	if err := checkDecoder(f.Decoder); err != nil {
		return nil, err
	}
	if err := t.buildModel(&f); err != nil {
		return nil, err
	}
	if err := t.buildAdded(&f); err != nil {
		return nil, err
	}
	t.eos = t.findEOS(opts.EOSToken)
	if opts.EOSToken != "" && t.eos < 0 {
		return nil, fmt.Errorf("eos token %q is not in the vocabulary", opts.EOSToken)
	}
	if err := t.checkTemplateIDs(tmpl); err != nil {
		return nil, err
	}
	if tmpl.empty() {
		if tmpl, err = t.configTemplate(opts); err != nil {
			return nil, err
		}
	}
	t.tmpl = tmpl
	return t, nil
}

// configTemplate is the template tokenizer_config.json's add_bos_token and
// add_eos_token ask for.
//
// transformers' LlamaTokenizerFast (and Gemma's) rebuild the post-processor
// from these flags whenever they load, replacing what tokenizer.json says;
// PreTrainedTokenizerFast, which Llama 3 and Qwen use, ignores them. We
// take the flags only when tokenizer.json's post-processor adds nothing, so
// that a file whose post-processor already adds BOS never gets it twice,
// and a true flag is never silently dropped. As in transformers, a flag set
// without its token is an error.
func (t *HFTokenizer) configTemplate(opts HFOptions) (template, error) {
	var tp template
	if opts.AddBOSToken {
		if opts.BOSToken == "" {
			return template{}, errors.New("tokenizer_config.json sets add_bos_token but no bos_token")
		}
		id := t.findToken(opts.BOSToken)
		if id < 0 {
			return template{}, fmt.Errorf("bos token %q is not in the vocabulary", opts.BOSToken)
		}
		tp.prefix = []int{id}
	}
	if opts.AddEOSToken {
		if opts.EOSToken == "" {
			return template{}, errors.New("tokenizer_config.json sets add_eos_token but no eos_token")
		}
		tp.suffix = []int{t.eos} // found above, or ParseHF failed
	}
	return tp, nil
}

func (t *HFTokenizer) buildModel(f *hfFile) error {
	m := f.Model
	switch m.Type {
	case "BPE":
	case "":
		if m.Merges == nil {
			return errors.New("tokenizer.json model has no type and no merges")
		}
	default:
		return fmt.Errorf("%w: model %q (only BPE)", ErrUnsupported, m.Type)
	}
	if m.Dropout != nil && *m.Dropout != 0 {
		return fmt.Errorf("%w: BPE dropout %v (tokenization would be random)", ErrUnsupported, *m.Dropout)
	}
	if m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "" {
		return fmt.Errorf("%w: BPE continuing_subword_prefix %q", ErrUnsupported, *m.ContinuingSubwordPrefix)
	}
	if m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "" {
		return fmt.Errorf("%w: BPE end_of_word_suffix %q", ErrUnsupported, *m.EndOfWordSuffix)
	}
	if m.ByteFallback {
		return fmt.Errorf("%w: BPE byte_fallback (a SentencePiece-style model, not byte-level)", ErrUnsupported)
	}
	if len(m.Vocab) == 0 {
		return errors.New("tokenizer.json model has an empty vocab")
	}

	bm := &bpeModel{
		vocab:        make(map[string]int32, len(m.Vocab)),
		merges:       make(map[uint64]merge),
		ignoreMerges: m.IgnoreMerges,
		unkID:        -1,
		fuseUnk:      m.FuseUnk,
		cache:        newWordCache(),
	}
	for i := range bm.byteID {
		bm.byteID[i] = -1
	}
	maxID := -1
	for _, id := range m.Vocab {
		if id < 0 || id >= 1<<31-1 {
			return fmt.Errorf("tokenizer.json vocab has id %d out of range", id)
		}
		maxID = max(maxID, id)
	}
	for _, at := range f.AddedTokens {
		if at.ID != nil {
			maxID = max(maxID, *at.ID)
		}
	}
	// Real vocabularies number their tokens densely; a far larger id would
	// only make us allocate tables for ids that do not exist.
	if limit := 4*(len(m.Vocab)+len(f.AddedTokens)) + 1<<16; maxID >= limit {
		return fmt.Errorf("tokenizer.json has id %d but only %d tokens: ids are too sparse", maxID, len(m.Vocab)+len(f.AddedTokens))
	}
	t.tokens = make([][]byte, maxID+1)
	t.special = make([]bool, maxID+1)
	t.spelled = make(map[int]string)
	for tok, id := range m.Vocab {
		raw, ok := byteLevelDecode(tok)
		if !ok {
			// Not reachable from byte-level text; decoded as its own UTF-8,
			// as Hugging Face's ByteLevel decoder does.
			t.tokens[id] = []byte(tok)
			t.spelled[id] = tok
			continue
		}
		t.tokens[id] = raw
		bm.vocab[string(raw)] = int32(id)
		if len(raw) == 1 {
			bm.byteID[raw[0]] = int32(id)
		}
	}
	if m.UnkToken != nil && *m.UnkToken != "" {
		id, ok := m.Vocab[*m.UnkToken]
		if !ok {
			return fmt.Errorf("tokenizer.json unk_token %q is not in the vocab", *m.UnkToken)
		}
		bm.unkID = int32(id)
	}
	pairs, err := parseMerges(m.Merges)
	if err != nil {
		return err
	}
	for rank, p := range pairs {
		a, okA := m.Vocab[p[0]]
		b, okB := m.Vocab[p[1]]
		c, okC := m.Vocab[p[0]+p[1]]
		if !okA || !okB || !okC {
			return fmt.Errorf("tokenizer.json merge %d (%q %q) uses a token missing from the vocab", rank, p[0], p[1])
		}
		// A repeated pair keeps its last rank, as in Hugging Face's map.
		bm.merges[pairKey(int32(a), int32(b))] = merge{rank: int32(rank), id: int32(c)}
	}
	t.model = bm
	return nil
}

// parseMerges accepts both merge formats: "a b" strings (older files) and
// ["a", "b"] pairs (tokenizers >= 0.20, needed when a token contains a space).
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var strs []string
	if err := json.Unmarshal(raw, &strs); err == nil {
		out := make([][2]string, len(strs))
		for i, s := range strs {
			a, b, ok := strings.Cut(s, " ")
			if !ok || strings.Contains(b, " ") {
				return nil, fmt.Errorf("tokenizer.json merge %d %q is not two tokens separated by one space", i, s)
			}
			out[i] = [2]string{a, b}
		}
		return out, nil
	}
	var pairs [][]string
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, fmt.Errorf("tokenizer.json merges are neither strings nor pairs: %w", err)
	}
	out := make([][2]string, len(pairs))
	for i, p := range pairs {
		if len(p) != 2 {
			return nil, fmt.Errorf("tokenizer.json merge %d has %d parts, want 2", i, len(p))
		}
		out[i] = [2]string{p[0], p[1]}
	}
	return out, nil
}

func (t *HFTokenizer) buildAdded(f *hfFile) error {
	t.rawTrie, t.normTrie = newTokenTrie(), newTokenTrie()
	for i, at := range f.AddedTokens {
		if at.ID == nil {
			return fmt.Errorf("tokenizer.json added token %d (%q) has no id", i, at.Content)
		}
		if at.Content == "" {
			return fmt.Errorf("tokenizer.json added token %d has empty content", *at.ID)
		}
		if *at.ID < 0 {
			return fmt.Errorf("tokenizer.json added token %q has negative id %d", at.Content, *at.ID)
		}
		normalized := !at.Special // Hugging Face's default when the field is absent
		if at.Normalized != nil {
			normalized = *at.Normalized
		}
		tok := addedToken{
			id: *at.ID, content: at.Content, special: at.Special,
			singleWord: at.SingleWord, lstrip: at.LStrip, rstrip: at.RStrip, normalized: normalized,
		}
		t.added = append(t.added, tok)
		idx := len(t.added) - 1
		if normalized {
			// Matched against normalized text, so match its normalized form.
			t.normTrie.add(t.normalize(at.Content), idx)
		} else {
			t.rawTrie.add(at.Content, idx)
		}
		t.tokens[tok.id] = decodeAddedContent(at.Content)
		t.spelled[tok.id] = at.Content
		t.special[tok.id] = tok.special
	}
	return nil
}

// decodeAddedContent gives the bytes an added token decodes to: Hugging
// Face passes added tokens through the ByteLevel decoder too, which maps them
// back from the byte-level alphabet when every rune is in it and otherwise
// keeps the token's UTF-8.
func decodeAddedContent(s string) []byte {
	if b, ok := byteLevelDecode(s); ok {
		return b
	}
	return []byte(s)
}

// findEOS returns the id of the end-of-sequence token name, or when name is
// empty of the first common end-of-sequence token the vocabulary has; -1
// when there is none.
func (t *HFTokenizer) findEOS(name string) int {
	names := []string{name}
	if name == "" {
		names = []string{"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>"}
	}
	for _, n := range names {
		if id := t.findToken(n); id >= 0 {
			return id
		}
	}
	return -1
}

// findToken returns the id of the token spelled name in tokenizer.json (an
// added token's content or a vocabulary entry in the byte-level alphabet),
// or -1.
func (t *HFTokenizer) findToken(name string) int {
	for _, at := range t.added {
		if at.content == name {
			return at.id
		}
	}
	if raw, ok := byteLevelDecode(name); ok {
		if id, ok := t.model.vocab[string(raw)]; ok {
			return int(id)
		}
	}
	return -1
}

// Encode implements llm.Tokenizer. With allowSpecial false, special added
// tokens written in the text are tokenized as ordinary text (Hugging Face's
// encode_special_tokens); non-special added tokens such as <think> are still
// matched, as Hugging Face always matches them. Invalid UTF-8 is read as
// U+FFFD.
func (t *HFTokenizer) Encode(text string, allowSpecial bool) []int {
	text = validText(text)
	ids := []int{}
	var outer, inner []segment
	var pieces, scratch []string
	outer = splitAdded(outer, text, t.rawTrie, t.added, !allowSpecial)
	for _, seg := range outer {
		if seg.token >= 0 {
			ids = append(ids, t.added[seg.token].id)
			continue
		}
		inner = splitAdded(inner[:0], t.normalize(seg.text), t.normTrie, t.added, !allowSpecial)
		for _, s := range inner {
			if s.token >= 0 {
				ids = append(ids, t.added[s.token].id)
				continue
			}
			pieces = append(pieces[:0], s.text)
			for _, pt := range t.preTok {
				scratch = scratch[:0]
				for _, p := range pieces {
					scratch = pt.split(scratch, p)
				}
				pieces, scratch = scratch, pieces
			}
			for _, p := range pieces {
				ids = t.model.encode(ids, p)
			}
		}
	}
	return ids
}

func (t *HFTokenizer) normalize(s string) string {
	if t.normalizer == nil || s == "" {
		return s
	}
	return t.normalizer.normalize(s)
}

// Decode implements llm.Tokenizer: the ByteLevel decoder over every id, with
// special added tokens left out when skipSpecial. Unknown ids are skipped, as
// in Hugging Face. No clean-up of spaces is done.
func (t *HFTokenizer) Decode(ids []int, skipSpecial bool) string {
	var b []byte
	for _, id := range ids {
		b = append(b, t.tokenBytes(id, skipSpecial)...)
	}
	return LossyUTF8(b)
}

// NewDecoder implements llm.Tokenizer.
func (t *HFTokenizer) NewDecoder(skipSpecial bool) llm.Decoder {
	return NewByteDecoder(func(id int) []byte { return t.tokenBytes(id, skipSpecial) })
}

func (t *HFTokenizer) tokenBytes(id int, skipSpecial bool) []byte {
	if id < 0 || id >= len(t.tokens) || (skipSpecial && t.special[id]) {
		return nil
	}
	return t.tokens[id]
}

// TokenString returns a token as tokenizer.json spells it, as Hugging
// Face's convert_ids_to_tokens does: a vocabulary entry in the byte-level
// alphabet ("Ġworld" for " world"), an added token as its content; "" for
// an id that names no token.
func (t *HFTokenizer) TokenString(id int) string {
	if s, ok := t.spelled[id]; ok {
		return s
	}
	if id < 0 || id >= len(t.tokens) || t.tokens[id] == nil {
		return ""
	}
	return ByteLevelEncode(t.tokens[id])
}

// AddSpecialTokens returns ids with the tokenizer's template tokens for a
// single sequence added (Llama 3: <|begin_of_text|> in front), as Hugging
// Face's encode(text, add_special_tokens=True) does; ids is not modified.
// The template is the tokenizer.json post_processor's (TemplateProcessing's
// single template, RobertaProcessing's and BertProcessing's cls and sep,
// also inside a Sequence), or when that adds nothing the BOS and EOS that
// HFOptions.AddBOSToken and AddEOSToken ask for. Qwen adds nothing.
func (t *HFTokenizer) AddSpecialTokens(ids []int) []int { return t.tmpl.apply(ids) }

// BOSTokenID returns the id AddSpecialTokens puts in front of a sequence,
// the beginning-of-sequence token (Llama 3: 128000, <|begin_of_text|>), or
// -1 when it puts nothing there, so that a caller can tell whether a
// prompt already starts with it (a chat template often writes it).
func (t *HFTokenizer) BOSTokenID() int { return t.tmpl.bos() }

// VocabSize implements llm.Tokenizer: one more than the largest id of the
// vocabulary and the added tokens.
func (t *HFTokenizer) VocabSize() int { return len(t.tokens) }

// EOSTokenID implements llm.Tokenizer.
func (t *HFTokenizer) EOSTokenID() int { return t.eos }

// IsSpecial implements llm.Tokenizer: added tokens marked special.
func (t *HFTokenizer) IsSpecial(id int) bool {
	return id >= 0 && id < len(t.special) && t.special[id]
}

// TokenID returns the id of a token given as text (an added token's content,
// or a vocabulary entry's raw text), for callers that need an id by name.
func (t *HFTokenizer) TokenID(s string) (int, bool) {
	for _, at := range t.added {
		if at.content == s {
			return at.id, true
		}
	}
	id, ok := t.model.vocab[s]
	return int(id), ok
}
