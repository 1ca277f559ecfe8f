package engine

import "slices"

// What a request does to its logits before sampling, in vLLM's order and
// float32 arithmetic: the allowed-token and bad-word masks, then the bias,
// then repetition over every token of the prompt and the output, then
// frequency and presence over the output's counts. They change the logits sampled from, not the
// log-probabilities reported, which stay those of the model (as vLLM's
// logprobs are by default).

// penalty is a request's record of the tokens its penalties read. It is
// nil for a request without penalties, which then pays nothing.
type penalty struct {
	counts map[int]int32    // generated token id -> times generated
	prompt map[int]struct{} // the prompt's token ids (repetition only)
}

// newPenalty returns the record a request with these penalties needs.
func newPenalty(q *request) *penalty {
	p := q.params
	rep := p.RepetitionPenalty != 0 && p.RepetitionPenalty != 1
	if !rep && p.PresencePenalty == 0 && p.FrequencyPenalty == 0 {
		return nil
	}
	pen := &penalty{counts: map[int]int32{}}
	if rep {
		pen.prompt = make(map[int]struct{}, len(q.req.PromptTokens))
		for _, t := range q.req.PromptTokens {
			pen.prompt[t] = struct{}{}
		}
	}
	return pen
}

// note records a generated token.
func (pen *penalty) note(tok int) {
	if pen != nil {
		pen.counts[tok]++
	}
}

// adjusted reports whether q's logits are changed before sampling: allowed
// token ids, bad words, a logit bias, penalties, or the min_tokens mask.
func (q *request) adjusted() bool {
	p := q.params
	return len(p.AllowedTokenIDs) > 0 || len(p.BadWords) > 0 || len(p.LogitBias) > 0 || q.pen != nil || q.maskActive()
}

// adjust applies q's allowed token ids, bad words, logit bias, penalties
// and min_tokens mask to logits, a copy the engine owns, for the next
// token, in vLLM's order (the two masks first).
func (q *request) adjust(logits []float32) {
	q.allow(logits)
	q.ban(logits)
	for id, b := range q.params.LogitBias {
		logits[id] += float32(b)
	}
	if q.pen != nil {
		q.pen.apply(logits, q.params.RepetitionPenalty, q.params.FrequencyPenalty, q.params.PresencePenalty)
	}
	q.mask(logits)
}

// allow sets every logit outside q's allowed token ids to -Inf (none when
// the list is empty). The allowed logits are kept aside in q.allowed while
// the row is cleared: no vocabulary-sized mask per request.
func (q *request) allow(logits []float32) {
	ids := q.params.AllowedTokenIDs
	if len(ids) == 0 {
		return
	}
	keep := q.allowed[:0]
	for _, id := range ids {
		keep = append(keep, logits[id])
	}
	ninf := float32(negInf)
	for i := range logits {
		logits[i] = ninf
	}
	for i, id := range ids {
		logits[id] = keep[i]
	}
	q.allowed = keep
}

// anyAllowed reports whether adjusted logits leave a token to sample. Only
// an allowed-token list, or more bans than half the vocabulary, can leave
// none, so the rows of other requests are not scanned.
func (q *request) anyAllowed(logits []float32) bool {
	ninf := float32(negInf)
	if ids := q.params.AllowedTokenIDs; len(ids) > 0 {
		for _, id := range ids {
			if logits[id] != ninf {
				return true
			}
		}
		return false
	}
	if 1+len(q.params.StopTokenIDs)+len(q.params.BadWords) < len(logits)/2 {
		return true
	}
	for _, v := range logits {
		if v != ninf {
			return true
		}
	}
	return false
}

// ban sets to -Inf the last token of every bad-word sequence whose other
// tokens end q's output so far.
func (q *request) ban(logits []float32) {
	out := q.tokens
	for _, seq := range q.params.BadWords {
		n := len(seq) - 1
		if n <= len(out) && slices.Equal(out[len(out)-n:], seq[:n]) {
			logits[seq[n]] = float32(negInf)
		}
	}
}

// apply penalizes logits, a copy the engine owns, for the next token.
func (pen *penalty) apply(logits []float32, repetition, frequency, presence float64) {
	if pen.prompt != nil {
		r := float32(repetition)
		scale := func(id int) {
			if logits[id] > 0 {
				logits[id] /= r
			} else {
				logits[id] *= r
			}
		}
		for id := range pen.prompt {
			scale(id)
		}
		for id := range pen.counts {
			if _, seen := pen.prompt[id]; !seen {
				scale(id)
			}
		}
	}
	f, pr := float32(frequency), float32(presence)
	for id, c := range pen.counts {
		logits[id] -= f * float32(c)
		logits[id] -= pr
	}
}
