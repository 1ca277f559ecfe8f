package engine

import (
	"fmt"
	"time"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/sched"
)

// Prompt log-probabilities (vLLM's prompt_logprobs): while a request that
// asked for them prefills, the backend returns the logits of every position
// of its chunk, and the row of position p scores prompt token p+1. Chunks
// come in order, so the last prompt position that scores a token,
// len(prompt)-2, marks them complete; a re-prefill after preemption does
// not ask again. Were a request preempted mid-prefill, its chunks would run
// again from position 0 and overwrite the same entries with the same values.

// promptSpan is one sequence's rows of prompt logits within a step's rows.
type promptSpan struct {
	q        *request
	row      int // index of the row of position start
	start, n int // positions start .. start+n-1
}

// wantsPromptLogits reports whether a chunk starting at start needs the
// logits of its positions: the request asked, has generated nothing yet (a
// token means the prompt was scored), and the chunk starts before the last
// prompt token.
func (q *request) wantsPromptLogits(start int) bool {
	return q.params.PromptLogprobs != nil && q.generated == 0 && start < len(q.req.PromptTokens)-1
}

// promptLogprobs scores the prompt tokens of this step's prompt spans.
func (st *stepper) promptLogprobs(rows []SampleRow) error {
	for _, sp := range st.promptSpans {
		prompt := sp.q.req.PromptTokens
		if sp.q.promptLP == nil {
			sp.q.promptLP = make([]llm.TokenLogprob, len(prompt)-1)
		}
		n := *sp.q.params.PromptLogprobs
		for j := range sp.n {
			p := sp.start + j
			if p >= len(prompt)-1 {
				break // the last prompt position is the sampled row
			}
			logits := rows[sp.row+j].Logits
			if len(logits) != st.info.VocabSize {
				return fmt.Errorf("%w: prompt logits row of %d at position %d, vocabulary of %d", ErrBackend, len(logits), p, st.info.VocabSize)
			}
			sp.q.promptLP[p] = logprobsOf(logits, prompt[p+1], n)
		}
	}
	return nil
}

// scored ends a request that only scores its prompt (MaxTokens 0) at its
// sampling point: one final event with the prompt's log-probabilities and
// no token. The scheduler still needs a token to end the sequence with;
// the backend's argmax serves, and is never shown.
func (st *stepper) scored(q *request, argmax int, now time.Time) {
	q.times.Finish = now
	q.done = true
	delete(st.reqs, q.id)
	st.counters.finished++
	st.sampled = append(st.sampled, sched.Sampled{ID: q.id, Token: max(argmax, 0), Finished: true})
	q.sink(llm.Event{PromptLogprobs: q.promptLP, Finish: llm.FinishLength, StopTokenID: -1,
		PromptTokens: len(q.req.PromptTokens), Time: now, Times: q.times})
}
