package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/tinyserve/tinyserve/llm"
)

// OpenAI error types, as the OpenAI API and its SDKs spell them. There is
// no not-found type: OpenAI answers an unknown model or URL with a 404 of
// type invalid_request_error (code model_not_found for a model), and its
// SDKs pick the error class (NotFoundError) from the status alone.
const (
	typeInvalidRequest = "invalid_request_error"
	typeRateLimit      = "rate_limit_error"
	typeServer         = "server_error"
	typeUnavailable    = "service_unavailable_error"
)

// codeDraining is the error code of a request turned away by a draining
// server: the one 5xx that is logged as a rejection, not a failure.
const codeDraining = "draining"

// apiError is one OpenAI error body plus the HTTP status it goes with.
// Param and Code are null in JSON when empty, as in OpenAI's responses.
type apiError struct {
	status     int
	retryAfter string // Retry-After header value, for 429
	Message    string
	Type       string
	Param      string
	Code       string
}

// Error implements error, so an apiError can travel as one.
func (e *apiError) Error() string { return e.Message }

// MarshalJSON writes the OpenAI shape {"message","type","param","code"}.
func (e *apiError) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}{e.Message, e.Type, nullable(e.Param), nullable(e.Code)})
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

type errorBody struct {
	Error *apiError `json:"error"`
}

func badRequest(param, code, format string, args ...any) *apiError {
	return &apiError{
		status: http.StatusBadRequest, Type: typeInvalidRequest, Param: param, Code: code,
		Message: fmt.Sprintf(format, args...),
	}
}

func errModelNotFound(name string) *apiError {
	// vLLM's wording for an unknown model; OpenAI's type and code.
	return &apiError{
		status: http.StatusNotFound, Type: typeInvalidRequest, Param: "model", Code: "model_not_found",
		Message: fmt.Sprintf("The model `%s` does not exist.", name),
	}
}

// engineError maps an error from the engine (Generate's rejection, or an
// error event) to its HTTP answer. Each llm sentinel says whether the request
// was admitted and whether a retry can help; the status carries that to the
// client: 400 never, 429 here later, 503 elsewhere, 500 unknown.
func engineError(err error) *apiError {
	var pe *llm.ParamError
	var ce *llm.ContextLengthError
	switch {
	case errors.As(err, &ce):
		return badRequest("prompt", "context_length_exceeded", "%s", ce.Error())
	case errors.As(err, &pe):
		return badRequest(pe.Param, "invalid_value", "%s", pe.Error())
	case errors.Is(err, llm.ErrContextLength):
		return badRequest("prompt", "context_length_exceeded", "%s", err.Error())
	case errors.Is(err, llm.ErrTooLargeForCache):
		return badRequest("prompt", "too_large_for_cache", "%s", err.Error())
	case errors.Is(err, llm.ErrInvalidRequest):
		return badRequest("", "invalid_value", "%s", err.Error())
	case errors.Is(err, llm.ErrOverloaded):
		return errOverloaded(err.Error())
	case errors.Is(err, llm.ErrDraining):
		return &apiError{status: http.StatusServiceUnavailable, Type: typeUnavailable, Code: codeDraining,
			Message: "the server is draining and admits no new requests; retry on another replica"}
	case errors.Is(err, llm.ErrEngineDead):
		return &apiError{status: http.StatusServiceUnavailable, Type: typeUnavailable, Code: "engine_dead",
			Message: "the engine has failed: " + err.Error()}
	case errors.Is(err, llm.ErrClosed):
		return &apiError{status: http.StatusServiceUnavailable, Type: typeUnavailable, Code: "engine_closed",
			Message: "the engine is closed"}
	default:
		return &apiError{status: http.StatusInternalServerError, Type: typeServer, Code: "internal_error",
			Message: "internal error: " + err.Error()}
	}
}

func errOverloaded(msg string) *apiError {
	return &apiError{status: http.StatusTooManyRequests, Type: typeRateLimit, Code: "rate_limit_exceeded",
		retryAfter: "1", Message: msg}
}

// writeError writes e as an OpenAI error body with JSON content type, and
// logs it on the request's logger.
func writeError(w http.ResponseWriter, r *http.Request, e *apiError) {
	if e.retryAfter != "" {
		w.Header().Set("Retry-After", e.retryAfter)
	}
	lg := requestLogger(r)
	// A draining server turning new requests away is doing its job during
	// every rollout: that is a rejection, not a failure.
	if e.status >= 500 && e.Code != codeDraining {
		lg.Error("request failed", "status", e.status, "type", e.Type, "err", e.Message)
	} else {
		lg.Info("request rejected", "status", e.status, "type", e.Type, "param", e.Param, "err", e.Message)
	}
	body, _ := json.Marshal(errorBody{e}) // cannot fail: strings only
	if e.status == http.StatusServiceUnavailable {
		// This replica cannot serve (draining, dead, closed). The OpenAI
		// SDKs retry a 503 at once on their pooled keep-alive connection,
		// which would bring every retry back here; closing it makes the
		// retry open a new one, which a connection-level balancer (a
		// Kubernetes Service) may send to another replica.
		w.Header().Set("Connection", "close")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(body)+1))
	w.WriteHeader(e.status)
	_, _ = w.Write(append(body, '\n'))
}
