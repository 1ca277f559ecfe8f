package openai

import (
	"bytes"
	"encoding/json"
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
	TokenLogprobs []float64     `json:"token_logprobs"`
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

// MarshalJSON writes the entries as one object, dropping later duplicates
// of a token text (two ids can decode to the same text).
func (t topLogprobs) MarshalJSON() ([]byte, error) {
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

// logprobs formats lps; offset is the text_offset of the first token (in
// characters of the choice's text) and is advanced past the last.
func (h *handler) logprobs(lps []llm.TokenLogprob, offset *int) *completionLogprobs {
	out := &completionLogprobs{
		Tokens:        make([]string, len(lps)),
		TokenLogprobs: make([]float64, len(lps)),
		TopLogprobs:   make([]topLogprobs, len(lps)),
		TextOffset:    make([]int, len(lps)),
	}
	for i, lp := range lps {
		tok := h.tokenText(lp.ID)
		out.Tokens[i] = tok
		out.TokenLogprobs[i] = finiteLogprob(lp.Logprob)
		top := make(topLogprobs, 0, len(lp.Top)+1)
		top = append(top, tokenLogprob{tok, finiteLogprob(lp.Logprob)})
		for _, alt := range lp.Top {
			top = append(top, tokenLogprob{h.tokenText(alt.ID), finiteLogprob(alt.Logprob)})
		}
		out.TopLogprobs[i] = top
		out.TextOffset[i] = *offset
		*offset += utf8.RuneCountInString(tok)
	}
	return out
}

// tokenText is one token's text as the logprobs object shows it; a token
// that is part of a UTF-8 character shows as U+FFFD, as in vLLM.
func (h *handler) tokenText(id int) string {
	return h.tok.Decode([]int{id}, false)
}
