package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/tinyserve/tinyserve/llm"
)

// minLogprob stands in for -Inf (a token the sampler masked out), which JSON
// cannot carry; vLLM uses the same floor.
const minLogprob = -9999.0

// completionLogprobs is the legacy completions logprobs object: parallel
// arrays, one entry per token.
type completionLogprobs struct {
	Tokens        []string      `json:"tokens"`
	TokenLogprobs []optLogprob  `json:"token_logprobs"`
	TopLogprobs   []topLogprobs `json:"top_logprobs"`
	TextOffset    []int         `json:"text_offset"`
}

// topLogprobs is one position's {token text: logprob} object. It is a slice
// so the JSON keeps a stable order: the chosen token first, then the
// alternatives, most likely first, as vLLM lists them.
type topLogprobs []tokenLogprob

type tokenLogprob struct {
	token   string
	logprob float64
}

// optLogprob is a token's log-probability, or null for the first token of
// an echoed prompt, which nothing predicts.
type optLogprob struct {
	v     float64
	valid bool
}

// MarshalJSON writes the value, or null.
func (o optLogprob) MarshalJSON() ([]byte, error) {
	if !o.valid {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, o.v, 'g', -1, 64), nil
}

// MarshalJSON writes the entries as one object, dropping later duplicates
// of a token text (two ids can decode to the same text); a nil list (the
// first token of an echoed prompt) is null.
func (t topLogprobs) MarshalJSON() ([]byte, error) {
	if t == nil {
		return []byte("null"), nil
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range t {
		dup := false
		for _, prev := range t[:i] {
			if prev.token == e.token {
				dup = true
				break
			}
		}
		if dup {
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(e.token)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.WriteString(strconv.FormatFloat(e.logprob, 'g', -1, 64))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func finiteLogprob(lp float32) float64 {
	f := float64(lp)
	if math.IsInf(f, -1) || math.IsNaN(f) || f < minLogprob {
		return minLogprob
	}
	return f
}

// choiceLogprobs formats the log-probabilities a choice has not yet sent:
// on its first response or chunk with echo, the prompt's tokens come first
// (the first of them with null, as nothing predicts it), then the generated
// ones. c.offset, the text_offset of the next token in characters of the
// choice's text, is advanced past the last.
func (h *handler) choiceLogprobs(c *choice, req *completionRequest, prompt []int, first bool) *completionLogprobs {
	n := len(c.lps)
	echoed := first && req.echo
	if echoed {
		n += len(prompt)
	}
	out := &completionLogprobs{
		Tokens:        make([]string, 0, n),
		TokenLogprobs: make([]optLogprob, 0, n),
		TopLogprobs:   make([]topLogprobs, 0, n),
		TextOffset:    make([]int, 0, n),
	}
	name := h.tokenText
	if req.tokensAsIDs {
		name = tokenIDText
	}
	if echoed {
		for i, id := range prompt {
			if i == 0 || i-1 >= len(c.promptLP) {
				tok := name(id)
				out.Tokens = append(out.Tokens, tok)
				out.TokenLogprobs = append(out.TokenLogprobs, optLogprob{})
				out.TopLogprobs = append(out.TopLogprobs, nil)
				out.TextOffset = append(out.TextOffset, c.offset)
				c.offset += utf8.RuneCountInString(tok)
				continue
			}
			// prompt_logprobs may have asked for more alternatives than
			// logprobs shows here.
			appendLogprob(out, c.promptLP[i-1], &c.offset, *req.params.Logprobs, name)
		}
	}
	for _, lp := range c.lps {
		appendLogprob(out, lp, &c.offset, len(lp.Top), name)
	}
	return out
}

// appendLogprob adds one token's entries to out, with at most maxTop of its
// alternatives, each token shown as name gives it; offset is the token's
// text_offset and is advanced past it.
func appendLogprob(out *completionLogprobs, lp llm.TokenLogprob, offset *int, maxTop int, name func(int) string) {
	tok := name(lp.ID)
	top := make(topLogprobs, 0, len(lp.Top)+1)
	top = append(top, tokenLogprob{tok, finiteLogprob(lp.Logprob)})
	for _, alt := range lp.Top[:min(maxTop, len(lp.Top))] {
		top = append(top, tokenLogprob{name(alt.ID), finiteLogprob(alt.Logprob)})
	}
	out.Tokens = append(out.Tokens, tok)
	out.TokenLogprobs = append(out.TokenLogprobs, optLogprob{finiteLogprob(lp.Logprob), true})
	out.TopLogprobs = append(out.TopLogprobs, top)
	out.TextOffset = append(out.TextOffset, *offset)
	*offset += utf8.RuneCountInString(tok)
}

// tokenText is one token's text as the logprobs object shows it; a token
// that is part of a UTF-8 character shows as U+FFFD, as in vLLM.
func (h *handler) tokenText(id int) string {
	return h.tok.Decode([]int{id}, false)
}

// tokenIDText is how vLLM's return_tokens_as_token_ids shows a token in
// the logprobs object: "token_id:<id>", which names tokens whose text is
// not valid UTF-8 on its own, and keeps two tokens with the same text apart
// as top_logprobs keys. text_offset then counts these strings, as vLLM's.
func tokenIDText(id int) string { return "token_id:" + strconv.Itoa(id) }

// vllmPromptLogprobs is vLLM's prompt_logprobs list in a completion choice:
// null for the first prompt token, which nothing predicts, then one object
// per prompt token from token id to {"logprob", "rank", "decoded_token"},
// the prompt token first, then the alternatives, most likely first.
type vllmPromptLogprobs []vllmPosition

// vllmPosition is one prompt position's object; nil is null.
type vllmPosition []vllmLogprob

type vllmLogprob struct {
	id, rank int
	logprob  float64
	token    string
}

// MarshalJSON writes the entries in order, as one object.
func (p vllmPosition) MarshalJSON() ([]byte, error) {
	if p == nil {
		return []byte("null"), nil
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range p {
		if i > 0 {
			b.WriteByte(',')
		}
		tok, err := json.Marshal(e.token)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, `"%d":{"logprob":%s,"rank":%d,"decoded_token":%s}`, e.id, strconv.FormatFloat(e.logprob, 'g', -1, 64), e.rank, tok)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// vllmPromptLogprobs formats a choice's prompt log-probabilities (lps[i]
// scores prompt[i+1]) as vLLM's prompt_logprobs.
func (h *handler) vllmPromptLogprobs(prompt []int, lps []llm.TokenLogprob) vllmPromptLogprobs {
	out := make(vllmPromptLogprobs, len(prompt))
	for i := 1; i < len(prompt) && i-1 < len(lps); i++ {
		lp := lps[i-1]
		pos := vllmPosition{{id: lp.ID, rank: lp.Rank, logprob: finiteLogprob(lp.Logprob), token: h.tokenText(lp.ID)}}
		for j, alt := range lp.Top {
			if alt.ID != lp.ID {
				pos = append(pos, vllmLogprob{id: alt.ID, rank: j + 1, logprob: finiteLogprob(alt.Logprob), token: h.tokenText(alt.ID)})
			}
		}
		out[i] = pos
	}
	return out
}
