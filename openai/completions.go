package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/tokenizer"
)

// promptIn is one tokenized prompt; text is what echo returns.
type promptIn struct {
	text   string
	tokens []int
	// maxTokens is the max_tokens its choices run with (maxTokensFor).
	maxTokens int
}

// choice is one sequence of a request (one prompt, one of its n) while it
// runs: what it produced so far and, when streaming, what is not yet sent.
type choice struct {
	index  int
	prompt int
	ch     <-chan llm.Event
	obs    observer

	text     strings.Builder
	tokenIDs []int
	lps      []llm.TokenLogprob
	promptLP []llm.TokenLogprob // the prompt's, with echo and logprobs
	offset   int                // text_offset of the next token, in characters
	sent     int                // characters of text streamed so far
	started  bool
	// newTokens counts the tokens applied since the last chunk, and
	// sentTokens those already streamed: a stream sends a chunk for every
	// event that carries a token, whatever its text (see streamCompletion).
	newTokens  int
	sentTokens int
	// held is set while the stream holds back events applied since the
	// last chunk, to merge them with the next one already queued.
	held bool

	finish           llm.FinishReason
	stopReason       any
	promptTokens     int
	cachedTokens     int // prompt tokens the prefix cache supplied
	completionTokens int
	err              error // set when the choice failed
}

// apply folds one event into the choice and reports whether it finished.
func (c *choice) apply(ev llm.Event, req *completionRequest) bool {
	if ev.PromptLogprobs != nil {
		c.promptLP = ev.PromptLogprobs
	}
	c.text.WriteString(ev.Text)
	c.newTokens += len(ev.TokenIDs)
	if req.returnTokenIDs {
		c.tokenIDs = append(c.tokenIDs, ev.TokenIDs...)
	}
	if req.params.Logprobs != nil {
		c.lps = append(c.lps, ev.Logprobs...)
	}
	c.completionTokens = ev.CompletionTokens
	c.promptTokens = ev.PromptTokens
	c.cachedTokens = max(c.cachedTokens, ev.CachedPromptTokens)
	stopIDs := req.params.StopTokenIDs
	if ev.Finish == "" {
		return false
	}
	c.finish = ev.Finish
	switch {
	case ev.Finish != llm.FinishStop:
	case ev.StopString != "":
		c.stopReason = ev.StopString
	case ev.StopTokenID >= 0 && slices.Contains(stopIDs, ev.StopTokenID):
		c.stopReason = ev.StopTokenID
	}
	switch ev.Finish {
	case llm.FinishAbort:
		c.err = ev.Err
		if c.err == nil {
			c.err = fmt.Errorf("request aborted: %w", llm.ErrClosed)
		}
	case llm.FinishError:
		c.err = ev.Err
		if c.err == nil {
			c.err = errors.New("the engine reported an error without a cause")
		}
	}
	return true
}

func (h *handler) completions(w http.ResponseWriter, r *http.Request) {
	body, ok := h.readBody(w, r)
	if !ok {
		return
	}
	req, e := decodeCompletion(body)
	if e != nil {
		writeError(w, r, e)
		return
	}
	if !h.checkModel(w, r, req.model) {
		return
	}
	req.withModelDefaults(h.info.Defaults)
	req.raiseTinyTemperature()
	if e := req.checkGreedyN(); e != nil {
		writeError(w, r, e)
		return
	}
	prompts, e := h.preparePrompts(r.Context(), req)
	if e != nil {
		if r.Context().Err() != nil {
			requestLogger(r).Info("client went away while its prompt was tokenized", "err", context.Cause(r.Context()))
			return
		}
		writeError(w, r, e)
		return
	}

	h.serve(w, r, req, prompts, func(ctx context.Context, cancel context.CancelFunc, choices []*choice) {
		if req.stream {
			h.streamCompletion(ctx, cancel, w, r, req, prompts, choices)
			return
		}
		h.finishCompletion(ctx, cancel, w, r, req, prompts, choices)
	})
}

// serve admits a request's choices (prompts times n engine requests)
// within the server's bounds, hands them to respond, which writes the
// answer, and accounts for every choice in the metrics when it returns.
// Refusals are answered here. Completions and chat completions share it.
func (h *handler) serve(w http.ResponseWriter, r *http.Request, req *completionRequest, prompts []promptIn,
	respond func(ctx context.Context, cancel context.CancelFunc, choices []*choice)) {
	ri := requestInfo(r)
	k := len(prompts) * req.n
	if limit := h.engineQueue; limit > 0 && k > limit {
		// The choices are submitted at once, each one engine request: the
		// engine's queue would refuse this one however idle it is.
		writeError(w, r, badRequest("n", "invalid_value",
			"the request needs %d sequences (prompts times n); the engine queues at most %d at once", k, limit))
		return
	}
	if limit := h.cfg.maxPending; limit > 0 {
		if k > limit {
			// A retry could never succeed, so this is not a 429.
			writeError(w, r, badRequest("n", "invalid_value",
				"the request needs %d sequences (prompts times n); this server admits at most %d at once", k, limit))
			return
		}
		if h.pending.Add(int64(k)) > int64(limit) {
			h.pending.Add(int64(-k))
			writeError(w, r, errOverloaded(fmt.Sprintf("the server has %d sequences pending, its limit; retry later", limit)))
			return
		}
		defer h.pending.Add(int64(-k))
	}

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	choices := make([]*choice, 0, k)
	defer func() {
		// Every choice of an admitted request ends in the metrics exactly
		// once: those the event loop saw finish were observed there; the
		// rest were cut short here (client gone, write failed, a sibling
		// failed) and are aborts whose final event, if any, nobody reads.
		// A request refused part-way has no choices left here.
		now := time.Now()
		for _, c := range choices {
			if c.finish == "" {
				h.m.abandoned(&c.obs, now)
			}
		}
		h.m.promptsFinished(choices)
	}()
	start := time.Now()
	for pi, p := range prompts {
		for j := range req.n {
			params := req.params
			params.MaxTokens = p.maxTokens
			if params.Seed != nil && j > 0 {
				// vLLM gives child j of a seeded n>1 request seed+j, so that
				// the choices differ yet each is reproducible.
				s := *params.Seed + int64(j)
				params.Seed = &s
			}
			i := len(choices)
			lr := llm.Request{ID: fmt.Sprintf("cmpl-%s-%d", ri.id, i), PromptTokens: p.tokens, Params: params}
			ch, err := h.eng.Generate(ctx, lr)
			if err != nil {
				// The choices already admitted are aborted and forgotten:
				// the request was refused as a whole, as vLLM admits its n
				// choices, so /metrics counts none of them.
				cancel()
				choices = nil
				if r.Context().Err() != nil {
					// Nobody is there to read an error: the engine
					// refused because the client had gone, or the
					// client went while it was refused.
					requestLogger(r).Info("client went away before its request was admitted", "err", context.Cause(r.Context()))
					return
				}
				writeError(w, r, engineError(err))
				return
			}
			choices = append(choices, &choice{index: i, prompt: pi, ch: ch, obs: observer{start: start}})
		}
	}
	for _, p := range prompts {
		h.m.admitted(req.n, p.maxTokens)
	}
	ri.log.Debug("completion admitted", "prompts", len(prompts), "n", req.n, "stream", req.stream, "user", req.user)
	respond(ctx, cancel, choices)
}

// preparePrompts tokenizes each prompt once (and the bad words, into
// req.params) and checks it against the vocabulary and the context length.
// A prompt too long for the context is refused once that is sure, not
// after tokenizing all of it (tokenizer.EncodePromptLimit), unless
// truncate_prompt_tokens asks for its last tokens; a client that goes
// away stops the work (ctx).
func (h *handler) preparePrompts(ctx context.Context, req *completionRequest) ([]promptIn, *apiError) {
	keep := req.truncate
	if keep == -1 {
		keep = h.info.MaxModelLen
	}
	if h.info.MaxModelLen > 0 && keep > h.info.MaxModelLen {
		return nil, badRequest("truncate_prompt_tokens", "invalid_value",
			"truncate_prompt_tokens (%d) is greater than max_model_len (%d); select a smaller truncation size", keep, h.info.MaxModelLen)
	}
	req.params.BadWords = badWordIDs(h.tok, req.badWords)
	prompts := make([]promptIn, 0, req.numPrompts())
	for _, t := range req.texts {
		if err := ctx.Err(); err != nil {
			return nil, badRequest("", "invalid_body", "%v", err) // the client went away: nobody reads it
		}
		// Special tokens written in the text are parsed as such, as a
		// Hugging Face tokenizer does in vLLM, and with add_special_tokens
		// (the default) the tokenizer's BOS is added where it has one.
		if keep > 0 || h.info.MaxModelLen <= 0 {
			prompts = append(prompts, promptIn{text: t, tokens: tokenizer.EncodePrompt(h.tok, t, req.addSpecial)})
			continue
		}
		ids, n, err := tokenizer.EncodePromptLimit(ctx, h.tok, t, req.addSpecial, h.info.MaxModelLen)
		if err != nil {
			return nil, badRequest("", "invalid_body", "%v", err) // the client went away: nobody reads it
		}
		if ids == nil {
			return nil, engineError(&llm.ContextLengthError{MaxModelLen: h.info.MaxModelLen, PromptTokens: n, PromptTruncated: true})
		}
		prompts = append(prompts, promptIn{text: t, tokens: ids})
	}
	for _, ids := range req.tokenLists {
		prompts = append(prompts, promptIn{tokens: ids})
	}
	for i := range prompts {
		p := &prompts[i]
		if keep > 0 && len(p.tokens) > keep {
			// The prompt's last tokens, as vLLM truncates; echo shows
			// their text, what the model actually saw.
			p.tokens, p.text = p.tokens[len(p.tokens)-keep:], ""
		}
		var err error
		if p.maxTokens, err = h.maxTokensFor(req, len(p.tokens)); err != nil {
			return nil, engineError(err)
		}
		lr := llm.Request{PromptTokens: p.tokens, Params: req.params}
		lr.Params.MaxTokens = p.maxTokens
		if err := lr.Validate(h.info.VocabSize); err != nil {
			return nil, engineError(err)
		}
		if req.echo && p.text == "" {
			p.text = h.tok.Decode(p.tokens, false)
		}
	}
	return prompts, nil
}

// maxTokensFor is the max_tokens of a prompt of promptLen tokens, as vLLM
// works it out: what the request asked for, which must fit the context
// with the prompt, or for "max_tokens": null the model's max_new_tokens
// where it has one and all the context the prompt leaves otherwise (at
// least one token, or the request cannot run); then at most the limit of
// a --generation-config folder.
func (h *handler) maxTokensFor(req *completionRequest, promptLen int) (int, error) {
	d, maxLen := h.info.Defaults, h.info.MaxModelLen
	n := req.params.MaxTokens
	if req.maxTokensNull {
		switch {
		case maxLen > 0:
			n = maxLen - promptLen
		case d.MaxTokens == nil:
			// An engine that states no context length (a test double)
			// gets the API's default rather than no limit at all.
			n = defaultMaxTokens
		}
		if d.MaxTokens != nil {
			n = min(n, *d.MaxTokens)
		}
		// Asking for as many as fit is asking for at least one.
		if maxLen > 0 {
			if err := llm.CheckContextLength(maxLen, promptLen, max(n, 1)); err != nil {
				return 0, err
			}
		}
	} else if maxLen > 0 {
		if err := llm.CheckContextLength(maxLen, promptLen, n); err != nil {
			return 0, err
		}
	}
	if d.MaxTokensLimit != nil {
		n = min(n, *d.MaxTokensLimit)
	}
	return n, nil
}

// eachEvent calls fn with every event of every choice in arrival order until
// fn returns false, every choice has finished or closed, or ctx ends; then
// it calls cancel, which aborts whatever still runs. ok is false when a
// choice's channel closed without a final event. queued says that another
// event of the same choice was already waiting in its channel (len(c.ch) >
// 0) when this one was taken or handed over, so fn will be called with it
// unless ctx ends or fn stops first; an engine with unbuffered channels
// never says so. A single choice is read directly (the common case stays
// free of goroutines); several are merged by one forwarding goroutine each,
// all gone when eachEvent returns.
func eachEvent(ctx context.Context, cancel context.CancelFunc, choices []*choice, fn func(c *choice, ev llm.Event, ok, queued bool) bool) {
	defer cancel()
	if len(choices) == 1 {
		c := choices[0]
		for {
			select {
			case ev, ok := <-c.ch:
				if !fn(c, ev, ok, ok && len(c.ch) > 0) || !ok || ev.Finish != "" {
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}
	type tagged struct {
		c      *choice
		ev     llm.Event
		ok     bool
		queued bool // another event was waiting when the forwarder took this one
	}
	var wg sync.WaitGroup
	defer func() {
		cancel() // unblocks the forwarders, and the engine closes their channels
		wg.Wait()
	}()
	merged := make(chan tagged)
	for _, c := range choices {
		wg.Go(func() {
			send := func(t tagged) bool {
				select {
				case merged <- t:
					return true
				case <-ctx.Done():
					return false
				}
			}
			for ev := range c.ch {
				if !send(tagged{c, ev, true, len(c.ch) > 0}) || ev.Finish != "" {
					return // after a final event only the channel's close is left
				}
			}
			send(tagged{c: c})
		})
	}
	open := len(choices)
	for open > 0 {
		select {
		case t := <-merged:
			if !t.ok || t.ev.Finish != "" {
				open--
			}
			// Only this choice's forwarder takes from its channel, so an
			// event waiting there now is still to come; one it took since
			// the handover is not seen, and a merge may stop short of it.
			if !fn(t.c, t.ev, t.ok, t.ok && (t.queued || len(t.c.ch) > 0)) {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// applyEach is eachEvent for the response writers: it applies every event
// to its choice (metrics, text, token ids, logprobs) and then calls fn with
// whether the choice just finished and, for one that did not, whether its
// next event is already queued (see eachEvent), and stops at the first
// choice that fails (an engine error, or a channel closed without a final
// event), which it returns.
func (h *handler) applyEach(ctx context.Context, cancel context.CancelFunc, choices []*choice, req *completionRequest, fn func(c *choice, finished, queued bool) bool) (failed *choice) {
	eachEvent(ctx, cancel, choices, func(c *choice, ev llm.Event, ok, queued bool) bool {
		if !ok {
			if c.finish != "" {
				return true
			}
			c.err = errors.New("the engine ended the request without a final event")
			failed = c
			return false
		}
		h.m.observe(&c.obs, ev)
		finished := c.apply(ev, req)
		if c.err != nil { // apply sets it only on a final event
			failed = c
			return false
		}
		return fn(c, finished, queued && !finished)
	})
	return failed
}

// finishCompletion waits for every choice and writes one JSON response.
func (h *handler) finishCompletion(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, r *http.Request,
	req *completionRequest, prompts []promptIn, choices []*choice) {
	wantLP := req.params.Logprobs != nil
	done := 0
	failed := h.applyEach(ctx, cancel, choices, req, func(c *choice, finished, _ bool) bool {
		if finished {
			done++
		}
		return done < len(choices)
	})
	if err := r.Context().Err(); err != nil {
		requestLogger(r).Info("client went away; request aborted", "err", context.Cause(r.Context()))
		return
	}
	if failed != nil {
		writeError(w, r, engineError(h.eventError(failed.err)))
		return
	}
	resp := completionResponse{
		ID: "cmpl-" + requestInfo(r).id, Object: "text_completion", Created: time.Now().Unix(),
		Model: h.modelName(req.model), Choices: make([]completionChoice, len(choices)),
	}
	u := usage{}
	cached := make([]int, len(prompts))
	for _, c := range choices {
		text := c.text.String()
		if req.echo {
			text = prompts[c.prompt].text + text
		}
		fr := string(c.finish)
		cc := completionChoice{Index: c.index, Text: text, FinishReason: &fr, StopReason: c.stopReason}
		if wantLP {
			cc.Logprobs = h.choiceLogprobs(c, req, prompts[c.prompt].tokens, true)
		}
		if req.returnTokenIDs {
			cc.PromptTokenIDs = nonNil(prompts[c.prompt].tokens)
			cc.TokenIDs = nonNil(c.tokenIDs)
		}
		if req.promptLogprobs {
			cc.PromptLogprobs = h.vllmPromptLogprobs(prompts[c.prompt].tokens, c.promptLP)
		}
		resp.Choices[c.index] = cc
		u.add(c, req.n, cached)
	}
	u.finish(cached)
	resp.Usage = &u
	h.writeJSON(w, r, http.StatusOK, resp)
}

// eventError classifies the error of a failed request. An error event from
// a backend failure that stopped the engine is ErrEngineDead (503: retry on
// another replica) even when the engine did not wrap it so.
func (h *handler) eventError(err error) error {
	if !errors.Is(err, llm.ErrEngineDead) && errors.Is(h.eng.Health(), llm.ErrEngineDead) {
		return fmt.Errorf("%w: %w", llm.ErrEngineDead, err)
	}
	return err
}

func nonNil(ids []int) []int {
	if ids == nil {
		return []int{}
	}
	return ids
}
