package openai

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/tokenizer"
)

// POST /tokenize and POST /detokenize follow vLLM's (the completion form of
// vLLM's TokenizeRequest), so benchmark clients can align their prompts to
// the server's own tokenizer.

type tokenizeRequest struct {
	Model            *string `json:"model"`
	Prompt           *string `json:"prompt"`
	AddSpecialTokens *bool   `json:"add_special_tokens"`
	ReturnTokenStrs  *bool   `json:"return_token_strs"`
	// The chat form (vLLM's TokenizeChatRequest): the conversation is
	// rendered with the chat template first.
	Messages             json.RawMessage `json:"messages"`
	AddGenerationPrompt  *bool           `json:"add_generation_prompt"`
	ContinueFinalMessage *bool           `json:"continue_final_message"`
	ChatTemplateKwargs   json.RawMessage `json:"chat_template_kwargs"`
	Tools                json.RawMessage `json:"tools"`
}

type tokenizeResponse struct {
	Count       int      `json:"count"`
	MaxModelLen int      `json:"max_model_len"`
	Tokens      []int    `json:"tokens"`
	TokenStrs   []string `json:"token_strs"`
}

type detokenizeRequest struct {
	Model *string `json:"model"`
	// Tokens is read by tokenIDs, which takes a long list in a fraction of
	// the memory encoding/json would.
	Tokens json.RawMessage `json:"tokens"`
}

type detokenizeResponse struct {
	Prompt string `json:"prompt"`
}

func (h *handler) tokenize(w http.ResponseWriter, r *http.Request) {
	body, ok := h.readBody(w, r)
	if !ok {
		return
	}
	var req tokenizeRequest
	known := func(k string) bool {
		switch k {
		case "model", "prompt", "add_special_tokens", "return_token_strs",
			"messages", "add_generation_prompt", "continue_final_message", "chat_template_kwargs", "tools":
			return true
		}
		return false
	}
	if e := decodeStrict(body, known, &req); e != nil {
		writeError(w, r, e)
		return
	}
	if req.Model != nil && !h.checkModel(w, r, *req.Model) {
		return
	}
	// add_special_tokens defaults to true, as vLLM's: a tokenizer whose
	// template adds a BOS (Llama 3) counts it, as a completion would. The
	// chat form's default is false: the template writes them.
	addSpecial := req.AddSpecialTokens == nil || *req.AddSpecialTokens
	switch {
	case req.Messages != nil && req.Prompt != nil:
		writeError(w, r, badRequest("messages", "invalid_value", "give either prompt or messages, not both"))
		return
	case req.Messages != nil:
		text, e := h.renderTokenizeChat(&req)
		if e != nil {
			writeError(w, r, e)
			return
		}
		req.Prompt = &text
		addSpecial = req.AddSpecialTokens != nil && *req.AddSpecialTokens
	case req.Prompt == nil:
		writeError(w, r, badRequest("prompt", "missing_required_parameter", "prompt (or messages) is required"))
		return
	}
	var ids []int
	if limit := h.info.MaxModelLen; limit > 0 {
		// Bounded as a completion's prompt is (vLLM tokenizes any length
		// here): a text that cannot fit the context is refused once that
		// is sure, in time proportional to the context, not the body.
		var n int
		var err error
		ids, n, err = tokenizer.EncodePromptLimit(r.Context(), h.tok, *req.Prompt, addSpecial, limit)
		if err != nil {
			requestLogger(r).Info("client went away while its prompt was tokenized", "err", err)
			return
		}
		if ids == nil {
			writeError(w, r, engineError(&llm.ContextLengthError{MaxModelLen: limit, PromptTokens: n, PromptTruncated: true}))
			return
		}
	} else {
		ids = tokenizer.EncodePrompt(h.tok, *req.Prompt, addSpecial)
	}
	resp := tokenizeResponse{Count: len(ids), MaxModelLen: h.info.MaxModelLen, Tokens: nonNil(ids)}
	if req.ReturnTokenStrs != nil && *req.ReturnTokenStrs {
		resp.TokenStrs = make([]string, len(ids))
		for i, id := range ids {
			resp.TokenStrs[i] = h.tokenString(id)
		}
	}
	h.writeJSON(w, r, http.StatusOK, resp)
}

// TokenStringer is an optional interface of an [llm.Tokenizer] (the GPT-2
// and tokenizer.json tokenizers of llm/tokenizer implement it): a token as
// its vocabulary spells it, as Hugging Face's convert_ids_to_tokens gives
// it ("Ġworld" for GPT-2's " world").
type TokenStringer interface {
	TokenString(id int) string
}

// tokenString is one token of /tokenize's token_strs: as vLLM lists them,
// the vocabulary's own spelling (convert_ids_to_tokens), which names every
// byte of a token that holds part of a UTF-8 character; a tokenizer
// without one (the mock's bytes) gives the token's decoded text.
func (h *handler) tokenString(id int) string {
	if ts, ok := h.tok.(TokenStringer); ok {
		return ts.TokenString(id)
	}
	return h.tokenText(id)
}

func (h *handler) detokenize(w http.ResponseWriter, r *http.Request) {
	body, ok := h.readBody(w, r)
	if !ok {
		return
	}
	var req detokenizeRequest
	known := func(k string) bool { return k == "model" || k == "tokens" }
	if e := decodeStrict(body, known, &req); e != nil {
		writeError(w, r, e)
		return
	}
	if req.Model != nil && !h.checkModel(w, r, *req.Model) {
		return
	}
	tokens := bytes.TrimSpace(req.Tokens)
	if len(tokens) == 0 || bytes.Equal(tokens, []byte("null")) {
		writeError(w, r, badRequest("tokens", "missing_required_parameter", "tokens is required"))
		return
	}
	if tokens[0] != '[' {
		writeError(w, r, badRequest("tokens", "invalid_type", "tokens: expected an array of integers, got %s", jsonKind(tokens)))
		return
	}
	ids, e := tokenIDs("tokens", "tokens", tokens)
	if e != nil {
		writeError(w, r, e)
		return
	}
	if limit := h.info.MaxModelLen; limit > 0 && len(ids) > limit {
		// No sequence of this model is longer than its context.
		writeError(w, r, badRequest("tokens", "context_length_exceeded",
			"This model's maximum context length is %d tokens. However, you gave %d tokens to detokenize.", limit, len(ids)))
		return
	}
	vocab := h.tok.VocabSize()
	for _, id := range ids {
		if id < 0 || id >= vocab {
			writeError(w, r, badRequest("tokens", "invalid_value", "token id %d is out of vocabulary range [0, %d)", id, vocab))
			return
		}
	}
	h.writeJSON(w, r, http.StatusOK, detokenizeResponse{Prompt: h.tok.Decode(ids, false)})
}

// renderTokenizeChat renders /tokenize's messages as a chat request's
// would be rendered.
func (h *handler) renderTokenizeChat(req *tokenizeRequest) (string, *apiError) {
	cr := &chatRequest{completionRequest: &completionRequest{}}
	cr.addGenerationPrompt = req.AddGenerationPrompt == nil || *req.AddGenerationPrompt
	cr.continueFinal = req.ContinueFinalMessage != nil && *req.ContinueFinalMessage
	if cr.continueFinal && cr.addGenerationPrompt {
		return "", badRequest("continue_final_message", "invalid_value",
			"Cannot set both `continue_final_message` and `add_generation_prompt` to True.")
	}
	var e *apiError
	if cr.messages, e = normalizeMessages(req.Messages, cr.continueFinal); e != nil {
		return "", e
	}
	if cr.tools, _, e = decodeTools(req.Tools, nil); e != nil {
		return "", e
	}
	if k := bytes.TrimSpace(req.ChatTemplateKwargs); len(k) > 0 && !bytes.Equal(k, []byte("null")) {
		if err := json.Unmarshal(k, &cr.templateKwargs); err != nil || cr.templateKwargs == nil {
			return "", badRequest("chat_template_kwargs", "invalid_type", "chat_template_kwargs: expected an object, got %s", jsonKind(k))
		}
	}
	return h.renderChat(cr)
}
