package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// This file reads the files of a Hugging Face "slow" byte-level BPE
// tokenizer, which is all that many GPT-2 checkpoint folders have (what
// GPT2Tokenizer.save_pretrained writes): vocab.json and merges.txt, plus
// added_tokens.json, special_tokens_map.json and tokenizer_config.json when
// present. transformers turns these into a fast tokenizer when it loads
// them (its GPT2Converter); LoadVocabMerges builds the same tokenizer.json
// in memory and reads it with ParseHF, so both kinds of folder go through
// one tokenizer.

// LoadVocabMerges reads the byte-level BPE tokenizer whose vocab.json and
// merges.txt are in dir, as transformers' converter does: a ByteLevel
// pre-tokenizer (tokenizer_config.json's add_prefix_space, false when
// absent) with GPT-2's regular expression, a BPE model of the vocabulary
// and merges, and as added tokens tokenizer_config.json's
// added_tokens_decoder, added_tokens.json's entries and the named special
// tokens (bos, eos, unk, pad, ..., additional_special_tokens) of
// special_tokens_map.json and tokenizer_config.json; bos, eos and unk
// tokens that neither file names are <|endoftext|>, as GPT2Tokenizer's
// defaults. The end-of-sequence token is eos_token.
func LoadVocabMerges(dir string) (*HFTokenizer, error) {
	doc, eos, err := vocabMergesDoc(dir)
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", dir, err)
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", dir, err)
	}
	t, err := ParseHF(data, HFOptions{EOSToken: eos})
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s (vocab.json and merges.txt): %w", dir, err)
	}
	return t, nil
}

// hasVocabMerges reports whether dir holds a slow tokenizer's two files.
func hasVocabMerges(dir string) bool {
	return isFile(filepath.Join(dir, "vocab.json")) && isFile(filepath.Join(dir, "merges.txt"))
}

// specialTokenKeys are the tokenizer_config.json / special_tokens_map.json
// keys that name one special token each.
var specialTokenKeys = []string{"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}

type hfAddedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// vocabMergesDoc builds the tokenizer.json document for dir's files and
// returns it with the eos token's content.
func vocabMergesDoc(dir string) (map[string]any, string, error) {
	var vocab map[string]int
	if err := readJSON(filepath.Join(dir, "vocab.json"), &vocab, false); err != nil {
		return nil, "", err
	}
	merges, err := readMerges(filepath.Join(dir, "merges.txt"))
	if err != nil {
		return nil, "", err
	}
	// tokenizer_config.json's keys, and special_tokens_map.json's where the
	// config does not set them (transformers reads both; the config wins).
	var cfg map[string]json.RawMessage
	if err := readJSON(filepath.Join(dir, "tokenizer_config.json"), &cfg, true); err != nil {
		return nil, "", err
	}
	var specialMap map[string]json.RawMessage
	if err := readJSON(filepath.Join(dir, "special_tokens_map.json"), &specialMap, true); err != nil {
		return nil, "", err
	}
	setting := func(key string) json.RawMessage {
		if v, ok := cfg[key]; ok && string(v) != "null" {
			return v
		}
		return specialMap[key]
	}
	addPrefixSpace := false
	if raw, ok := cfg["add_prefix_space"]; ok {
		if err := json.Unmarshal(raw, &addPrefixSpace); err != nil {
			return nil, "", fmt.Errorf("tokenizer_config.json: add_prefix_space: %w", err)
		}
	}

	added := map[int]*hfAddedToken{}
	var decoderEntries map[string]hfAddedToken
	if raw, ok := cfg["added_tokens_decoder"]; ok {
		if err := json.Unmarshal(raw, &decoderEntries); err != nil {
			return nil, "", fmt.Errorf("tokenizer_config.json: added_tokens_decoder: %w", err)
		}
	}
	for key, at := range decoderEntries {
		id, err := strconv.Atoi(key)
		if err != nil || id < 0 || at.Content == "" {
			return nil, "", fmt.Errorf("tokenizer_config.json: added_tokens_decoder entry %q is not an id with content", key)
		}
		at.ID = id
		added[id] = &at
	}
	var addedFile map[string]int
	if err := readJSON(filepath.Join(dir, "added_tokens.json"), &addedFile, true); err != nil {
		return nil, "", err
	}
	for content, id := range addedFile {
		if _, ok := added[id]; !ok {
			added[id] = &hfAddedToken{ID: id, Content: content, Normalized: true}
		}
	}
	idOf := func(content string) (int, bool) {
		for id, at := range added {
			if at.Content == content {
				return id, true
			}
		}
		id, ok := vocab[content]
		return id, ok
	}
	markSpecial := func(key, content string) error {
		id, ok := idOf(content)
		if !ok {
			return fmt.Errorf("%s %q is neither in vocab.json nor an added token", key, content)
		}
		if at, ok := added[id]; ok {
			at.Special, at.Normalized = true, false
		} else {
			added[id] = &hfAddedToken{ID: id, Content: content, Special: true}
		}
		return nil
	}
	var eos string
	for _, key := range specialTokenKeys {
		content, err := tokenContent(setting(key))
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", key, err)
		}
		if _, set := cfg[key]; !set && content == "" && (key == "bos_token" || key == "eos_token" || key == "unk_token") {
			if _, set := specialMap[key]; !set {
				// GPT2Tokenizer's default for each of the three: <|endoftext|>,
				// special even when another token is the eos_token.
				if _, ok := idOf(GPT2EOSText); ok {
					content = GPT2EOSText
				}
			}
		}
		if content == "" {
			continue
		}
		if key == "eos_token" {
			eos = content
		}
		if err := markSpecial(key, content); err != nil {
			return nil, "", err
		}
	}
	if raw := setting("additional_special_tokens"); len(raw) > 0 && string(raw) != "null" {
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, "", fmt.Errorf("additional_special_tokens: %w", err)
		}
		for _, r := range list {
			content, err := tokenContent(r)
			if err != nil || content == "" {
				return nil, "", fmt.Errorf("additional_special_tokens: %s is not a token", r)
			}
			if err := markSpecial("additional_special_tokens", content); err != nil {
				return nil, "", err
			}
		}
	}

	ids := make([]int, 0, len(added))
	for id := range added {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	addedList := make([]*hfAddedToken, len(ids))
	for i, id := range ids {
		addedList[i] = added[id]
	}
	doc := map[string]any{
		"version":       "1.0",
		"added_tokens":  addedList,
		"normalizer":    nil,
		"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": addPrefixSpace, "trim_offsets": true, "use_regex": true},
		"decoder":       map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model":         map[string]any{"type": "BPE", "vocab": vocab, "merges": merges},
	}
	return doc, eos, nil
}

// readMerges reads merges.txt: an optional "#version" first line, then one
// merge per line as two tokens separated by a space. A merge listed again
// keeps its first place, as in transformers' converter, which takes the
// keys of GPT2Tokenizer's bpe_ranks dict (in first-insertion order).
func readMerges(path string) ([][2]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out [][2]string
	seen := map[[2]string]bool{}
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if i == 0 && strings.HasPrefix(line, "#version") || line == "" {
			continue
		}
		parts := strings.Fields(line)
		if len(parts) != 2 {
			return nil, fmt.Errorf("merges.txt line %d %q is not two tokens separated by a space", i+1, shorten(line))
		}
		m := [2]string{parts[0], parts[1]}
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	return out, nil
}

// readJSON decodes the file at path into v; a missing file is an error
// unless optional.
func readJSON(path string, v any, optional bool) error {
	data, err := os.ReadFile(path)
	if optional && errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return nil
}

// tokenContent reads a special token setting: a string, or an AddedToken
// object with "content". Absent or null gives "".
func tokenContent(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var obj struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return "", fmt.Errorf("%s is neither a string nor a token object", raw)
	}
	return obj.Content, nil
}

func shorten(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
