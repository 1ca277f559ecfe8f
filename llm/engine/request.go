package engine

import (
	"math/rand/v2"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/kv"
)

// request is the engine's state of one admitted request: sampling, stop
// checks and the text sent so far. It belongs to the engine's goroutine.
type request struct {
	id     kv.SeqID
	req    llm.Request
	params *llm.SamplingParams
	rng    *rand.Rand
	dec    llm.Decoder
	sink   func(llm.Event) // where events go; never blocks

	tokens       []int  // generated token ids
	text         []byte // generated text after stop-string truncation
	sent         int    // bytes of text already sent
	holdBack     int    // bytes kept back while they could start a stop string
	generated    int
	cachedTokens int                // prompt tokens the prefix cache held at admission
	eos          int                // the EOS id, or -1 when ignored or absent
	promptLP     []llm.TokenLogprob // prompt log-probabilities by position - 1, when asked
	pen          *penalty           // nil without penalties
	allowed      []float32          // scratch of allow: the allowed ids' logits
	times        llm.Timestamps
	// scheduled is set when the scheduler first gives the request tokens,
	// and with it the request's waiting-queue place is free again. A flag
	// of its own, not times.FirstScheduled: Config.Now may be a test clock
	// that returns the zero time.
	scheduled bool
	done      bool
}

func newRequest(id kv.SeqID, r llm.Request, tok llm.Tokenizer, eos int, seed uint64, sink func(llm.Event), now time.Time) *request {
	q := &request{id: id, req: r, params: &r.Params, sink: sink, eos: eos}
	if r.Params.IgnoreEOS {
		q.eos = -1
	}
	if r.Params.Seed != nil {
		seed = uint64(*r.Params.Seed)
	}
	q.rng = rand.New(rand.NewPCG(seed, 0x7469_6e79_7365_7276)) // "tinyserv"
	q.dec = tok.NewDecoder(!r.Params.KeepSpecialTokens)
	if !r.Params.IncludeStopStrInOutput {
		// Text that may turn out to start a stop string waits; with the stop
		// string kept in the output nothing needs to (vLLM does the same).
		for _, s := range r.Params.Stop {
			q.holdBack = max(q.holdBack, len(s)-1)
		}
	}
	q.pen = newPenalty(q)
	q.times.Arrival = now
	// Room for the usual completion up front saves the doublings later.
	q.tokens = make([]int, 0, min(r.Params.MaxTokens, 256))
	if len(r.Params.Stop) > 0 {
		q.text = make([]byte, 0, min(r.Params.MaxTokens, 256)*4)
	}
	return q
}

// maskActive reports whether EOS and stop token ids must be masked for the
// next token, because min_tokens has not been reached (as in vLLM).
func (q *request) maskActive() bool {
	return q.generated < q.params.MinTokens && (q.eos >= 0 || len(q.params.StopTokenIDs) > 0)
}

// needLogits reports whether the next sample needs the full logits row.
func (q *request) needLogits() bool {
	if q.params.MaxTokens == 0 {
		return false // the prompt only: nothing is sampled
	}
	return !q.params.Greedy() || q.params.Logprobs != nil || q.adjusted()
}

// mask sets the logits of tokens that may not end the request yet to -Inf.
func (q *request) mask(logits []float32) {
	if !q.maskActive() {
		return
	}
	ninf := float32(negInf)
	if q.eos >= 0 && q.eos < len(logits) {
		logits[q.eos] = ninf
	}
	for _, id := range q.params.StopTokenIDs {
		if id < len(logits) {
			logits[id] = ninf
		}
	}
}

// accept records a sampled token and returns the event to send, with
// Finish set when a stop condition fired.
func (q *request) accept(tok int, lp *llm.TokenLogprob, now time.Time) llm.Event {
	q.generated++
	q.pen.note(tok)
	if q.generated == 1 {
		q.times.FirstToken = now
	}
	// Events share one growing array of generated ids: a view is never
	// written again once sent, so this saves an allocation per token.
	q.tokens = append(q.tokens, tok)
	n := len(q.tokens)
	ev := llm.Event{TokenIDs: q.tokens[n-1 : n : n], StopTokenID: -1, PromptTokens: len(q.req.PromptTokens), CachedPromptTokens: q.cachedTokens, CompletionTokens: q.generated, Time: now}
	if lp != nil {
		ev.Logprobs = []llm.TokenLogprob{*lp}
	}
	pastMin := q.generated > q.params.MinTokens
	switch {
	case tok == q.eos && pastMin:
		ev.Finish = llm.FinishStop
		q.keepStopToken(tok)
	case pastMin && slices.Contains(q.params.StopTokenIDs, tok):
		ev.Finish = llm.FinishStop
		ev.StopTokenID = tok
		q.keepStopToken(tok)
	case len(q.params.Stop) == 0:
		// Without stop strings no text needs keeping: pass the delta on.
		ev.Text = q.dec.Add(tok)
		if q.generated >= q.params.MaxTokens {
			ev.Finish = llm.FinishLength
			ev.Text += q.dec.Flush()
		}
		return ev
	default:
		prev := len(q.text)
		q.text = append(q.text, q.dec.Add(tok)...)
		if pastMin {
			if s, at := q.findStop(prev); s != "" {
				if q.params.IncludeStopStrInOutput {
					at += len(s)
				}
				q.text = q.text[:at]
				ev.Finish = llm.FinishStop
				ev.StopString = s
			}
		}
		if ev.Finish == "" && q.generated >= q.params.MaxTokens {
			ev.Finish = llm.FinishLength
			q.text = append(q.text, q.dec.Flush()...)
		}
	}
	ev.Text = q.takeText(ev.Finish != "")
	return ev
}

// keepStopToken ends the text of a request stopped by the token tok (EOS or
// a stop token id). It adds the token's text when the request asked for
// IncludeStopStrInOutput, as vLLM does (EOS writes nothing unless
// KeepSpecialTokens), and flushes the decoder: a character the generated
// tokens left unfinished shows as U+FFFD, as at a length finish and as
// decoding the tokens gives it, rather than vanishing.
func (q *request) keepStopToken(tok int) {
	if q.params.IncludeStopStrInOutput {
		q.text = append(q.text, q.dec.Add(tok)...)
	}
	q.text = append(q.text, q.dec.Flush()...)
}

// findStop returns the earliest stop string whose match ends in the text
// added since prev, and where it starts. As in vLLM, a match lying wholly in
// older text does not count: that text was either checked already or
// produced before min_tokens was reached. Because takeText keeps the last
// holdBack bytes unsent, a match that ends in new text always starts at or
// after q.sent; with IncludeStopStrInOutput nothing is held back, and the
// text is cut after the match, which ends in new text, so after q.sent.
func (q *request) findStop(prev int) (string, int) {
	best, bestAt := "", len(q.text)
	for _, s := range q.params.Stop {
		from := max(0, prev-len(s)+1)
		if i := strings.Index(string(q.text[from:]), s); i >= 0 && from+i < bestAt {
			best, bestAt = s, from+i
		}
	}
	return best, bestAt
}

// takeText returns the text that can be sent now: all of it when the
// request finished, else all but the bytes that could still turn out to be
// the start of a stop string, cut at a character boundary.
func (q *request) takeText(final bool) string {
	end := len(q.text)
	if !final && q.holdBack > 0 {
		end = max(q.sent, end-q.holdBack)
		for end > q.sent && !utf8.RuneStart(q.text[end]) {
			end--
		}
	}
	out := string(q.text[q.sent:end])
	q.sent = end
	return out
}
