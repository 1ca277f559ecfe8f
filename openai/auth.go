package openai

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// WithAPIKeys makes the /v1/ routes answer only requests that carry one of
// keys as "Authorization: Bearer <key>", as vllm serve --api-key does;
// others get a 401 in OpenAI's shape (code invalid_api_key). /health,
// /metrics, /tokenize and /detokenize stay open, as in vLLM, so that probes
// and scrapers need no secret. Empty keys are ignored; no key means no
// check.
func WithAPIKeys(keys ...string) Option {
	return func(c *config) {
		c.apiKeys = nil
		for _, k := range keys {
			if k != "" {
				c.apiKeys = append(c.apiKeys, sha256.Sum256([]byte(k)))
			}
		}
	}
}

// requireAPIKey wraps next with the check of WithAPIKeys.
func requireAPIKey(keys [][sha256.Size]byte, next http.Handler) http.Handler {
	if len(keys) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.URL.Path == "/v1" || strings.HasPrefix(r.URL.Path, "/v1/")) && !validKey(keys, r.Header.Get("Authorization")) {
			writeError(w, r, &apiError{
				status: http.StatusUnauthorized, Type: typeInvalidRequest, Code: "invalid_api_key",
				Message: "Incorrect or missing API key: send it as \"Authorization: Bearer <key>\".",
			})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// validKey reports whether header is "Bearer " and one of keys. The keys
// are compared as SHA-256 digests in constant time, so neither a key's
// length nor its bytes leak through the time a refusal takes.
func validKey(keys [][sha256.Size]byte, header string) bool {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	match := 0
	for _, k := range keys {
		match |= subtle.ConstantTimeCompare(got[:], k[:])
	}
	return match == 1
}
