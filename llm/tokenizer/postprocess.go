package tokenizer

import (
	"encoding/json"
	"fmt"
	"slices"
)

// template is what a post-processor does to the ids of a single sequence
// when special tokens are added: ids in front and ids behind. Every
// post-processor Hugging Face has for byte-level models (ByteLevel,
// TemplateProcessing, RobertaProcessing, BertProcessing and Sequences of
// them) reduces to this for one sequence; offsets, type ids and the pair
// template do not reach Encode's ids, so they are not kept.
type template struct {
	prefix, suffix []int
}

// empty reports whether the template adds nothing.
func (t template) empty() bool { return len(t.prefix) == 0 && len(t.suffix) == 0 }

// wrap is the template that applies inner first and then outer, as
// Hugging Face's Sequence post-processor runs its processors in order, each
// on the previous one's output.
func (outer template) wrap(inner template) template {
	return template{
		prefix: slices.Concat(outer.prefix, inner.prefix),
		suffix: slices.Concat(inner.suffix, outer.suffix),
	}
}

// bos is the id the template puts first, the beginning-of-sequence token
// (the prefix is made only of special-token pieces), or -1 when the
// sequence comes first.
func (t template) bos() int {
	if len(t.prefix) == 0 {
		return -1
	}
	return t.prefix[0]
}

// apply returns ids with the template around them, in a new slice.
func (t template) apply(ids []int) []int {
	out := make([]int, 0, len(t.prefix)+len(ids)+len(t.suffix))
	out = append(out, t.prefix...)
	out = append(out, ids...)
	return append(out, t.suffix...)
}

// parsePostProcessor reads tokenizer.json's post_processor into the template
// it applies to a single sequence. Ids are not checked against the
// vocabulary here (the model is not built yet); see checkTemplateIDs.
func parsePostProcessor(raw json.RawMessage) (template, error) {
	typ, err := componentType(raw, "post_processor")
	if err != nil {
		return template{}, err
	}
	switch typ {
	case "", "ByteLevel":
		// ByteLevel only trims offsets.
		return template{}, nil
	case "Sequence":
		var s struct {
			Processors []json.RawMessage `json:"processors"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			return template{}, fmt.Errorf("tokenizer.json Sequence post_processor: %w", err)
		}
		var t template
		for _, r := range s.Processors {
			next, err := parsePostProcessor(r)
			if err != nil {
				return template{}, err
			}
			t = next.wrap(t)
		}
		return t, nil
	case "TemplateProcessing":
		return parseTemplateProcessing(raw)
	case "RobertaProcessing", "BertProcessing":
		// Both are "cls $A sep" for one sequence, with (token, id) pairs.
		var s struct {
			Sep []json.RawMessage `json:"sep"`
			Cls []json.RawMessage `json:"cls"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			return template{}, fmt.Errorf("tokenizer.json %s post_processor: %w", typ, err)
		}
		cls, err := tokenIDPair(s.Cls)
		if err != nil {
			return template{}, fmt.Errorf("tokenizer.json %s post_processor cls: %w", typ, err)
		}
		sep, err := tokenIDPair(s.Sep)
		if err != nil {
			return template{}, fmt.Errorf("tokenizer.json %s post_processor sep: %w", typ, err)
		}
		return template{prefix: []int{cls}, suffix: []int{sep}}, nil
	default:
		return template{}, fmt.Errorf("%w: post_processor %q (supported: ByteLevel, TemplateProcessing, RobertaProcessing, BertProcessing, Sequence)", ErrUnsupported, typ)
	}
}

// tokenIDPair reads a ["token", id] pair and returns the id.
func tokenIDPair(pair []json.RawMessage) (int, error) {
	if len(pair) != 2 {
		return 0, fmt.Errorf("want [token, id], got %d elements", len(pair))
	}
	var id int
	if err := json.Unmarshal(pair[1], &id); err != nil {
		return 0, fmt.Errorf("id: %w", err)
	}
	return id, nil
}

// parseTemplateProcessing reads the single-sequence template of a
// TemplateProcessing post-processor: its pieces in order, exactly one of
// them the sequence $A, the others special tokens whose ids the
// special_tokens table gives (one name may stand for several ids).
func parseTemplateProcessing(raw json.RawMessage) (template, error) {
	var s struct {
		Single []struct {
			Sequence *struct {
				ID string `json:"id"`
			} `json:"Sequence"`
			SpecialToken *struct {
				ID string `json:"id"`
			} `json:"SpecialToken"`
		} `json:"single"`
		SpecialTokens map[string]struct {
			IDs []int `json:"ids"`
		} `json:"special_tokens"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return template{}, fmt.Errorf("tokenizer.json TemplateProcessing post_processor: %w", err)
	}
	var t template
	seen := false // whether $A has been placed: pieces after it are the suffix
	for i, p := range s.Single {
		switch {
		case p.Sequence != nil && p.SpecialToken == nil:
			if p.Sequence.ID != "A" {
				return template{}, fmt.Errorf("%w: TemplateProcessing single template with sequence %q (only A)", ErrUnsupported, p.Sequence.ID)
			}
			if seen {
				return template{}, fmt.Errorf("%w: TemplateProcessing single template with $A twice", ErrUnsupported)
			}
			seen = true
		case p.SpecialToken != nil && p.Sequence == nil:
			st, ok := s.SpecialTokens[p.SpecialToken.ID]
			if !ok {
				return template{}, fmt.Errorf("tokenizer.json TemplateProcessing uses special token %q missing from its special_tokens", p.SpecialToken.ID)
			}
			if seen {
				t.suffix = append(t.suffix, st.IDs...)
			} else {
				t.prefix = append(t.prefix, st.IDs...)
			}
		default:
			return template{}, fmt.Errorf("%w: TemplateProcessing single template piece %d (only Sequence and SpecialToken)", ErrUnsupported, i)
		}
	}
	if !seen {
		return template{}, fmt.Errorf("%w: TemplateProcessing single template without $A", ErrUnsupported)
	}
	return t, nil
}

// checkTemplateIDs requires every id the template adds to name a token, so
// that AddSpecialTokens never produces an id outside the vocabulary.
func (t *HFTokenizer) checkTemplateIDs(tp template) error {
	for _, id := range slices.Concat(tp.prefix, tp.suffix) {
		if id < 0 || id >= len(t.tokens) || t.tokens[id] == nil {
			return fmt.Errorf("tokenizer.json post_processor adds id %d, which names no token", id)
		}
	}
	return nil
}
