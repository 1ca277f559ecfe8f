package engine

import (
	"fmt"
	"runtime"
	"sync"
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
// Each row is a log-softmax over the vocabulary (0.06 ms for GPT-2's, more
// with alternatives); a long chunk has thousands, which would stall the
// step on one core, so they are spread over the cores (the rows are
// independent).
func (st *stepper) promptLogprobs(rows []SampleRow) error {
	tasks := st.scoreTasks[:0]
	// The tasks point into the backend's logits and the requests: drop
	// those references once scored, so that a backend's large prompt-logits
	// buffer can go when it lets it go.
	defer func() { clear(tasks) }()
	for _, sp := range st.promptSpans {
		prompt := sp.q.req.PromptTokens
		if sp.q.promptLP == nil {
			sp.q.promptLP = make([]llm.TokenLogprob, len(prompt)-1)
		}
		for j := range sp.n {
			p := sp.start + j
			if p >= len(prompt)-1 {
				break // the last prompt position is the sampled row
			}
			logits := rows[sp.row+j].Logits
			if len(logits) != st.info.VocabSize {
				return fmt.Errorf("%w: prompt logits row of %d at position %d, vocabulary of %d", ErrBackend, len(logits), p, st.info.VocabSize)
			}
			tasks = append(tasks, scoreTask{dst: &sp.q.promptLP[p], logits: logits, tok: prompt[p+1], n: *sp.q.params.PromptLogprobs})
		}
	}
	st.scoreTasks = tasks
	workers := max(1, min(runtime.GOMAXPROCS(0), len(tasks)/scoreRowsPerWorker))
	for len(st.scoreBufs) < workers {
		st.scoreBufs = append(st.scoreBufs, nil)
	}
	per := (len(tasks) + workers - 1) / workers
	score := func(w int, part []scoreTask) {
		for _, t := range part {
			*t.dst = logprobsOf(t.logits, t.tok, t.n, &st.scoreBufs[w])
		}
	}
	if workers == 1 {
		score(0, tasks)
		return nil
	}
	var wg sync.WaitGroup
	for w := range workers {
		part := tasks[min(w*per, len(tasks)):min((w+1)*per, len(tasks))]
		wg.Go(func() { score(w, part) })
	}
	wg.Wait()
	return nil
}

// scoreTask is one prompt position to score: the log-probability of tok
// and the n most likely tokens under logits, written to dst.
type scoreTask struct {
	dst    *llm.TokenLogprob
	logits []float32
	tok, n int
}

// scoreRowsPerWorker is the fewest rows worth a goroutine of their own.
const scoreRowsPerWorker = 16

// finishPromptOnly ends a request that runs its prompt only (MaxTokens 0)
// at its sampling point: one final event, with the prompt's
// log-probabilities when asked, and no token. The scheduler ends the
// sequence there too; the token it is told is never computed.
func (st *stepper) finishPromptOnly(q *request, now time.Time) {
	st.retire(q, now)
	st.sampled = append(st.sampled, sched.Sampled{ID: q.id, Token: 0, Finished: true})
	q.sink(llm.Event{PromptLogprobs: q.takePromptLP(), Finish: llm.FinishLength, StopTokenID: -1,
		PromptTokens: len(q.req.PromptTokens), CachedPromptTokens: q.cachedTokens, Time: now, Times: q.times})
}

// takePromptLP returns the prompt log-probabilities for the request's first
// event, and lets the request forget them: empty, not nil, when asked of a
// one-token prompt; nil when not asked.
func (q *request) takePromptLP() []llm.TokenLogprob {
	if q.params.PromptLogprobs == nil {
		return nil
	}
	lp := q.promptLP
	if lp == nil {
		lp = []llm.TokenLogprob{}
	}
	q.promptLP = nil
	return lp
}
