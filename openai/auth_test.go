package openai

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/mock"
)

// TestAPIKeys: with keys, every /v1/ route wants one of them as a bearer
// token and answers anything else with OpenAI's 401; the probes and the
// tokenizer routes stay open, as in vLLM; no keys (or only empty ones)
// means no check.
func TestAPIKeys(t *testing.T) {
	ms := newMockServer(t, mock.Config{}, engine.Config{}, WithAPIKeys("k1", "", "second key"))
	do := func(method, path, auth, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, ms.srv.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := ms.client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var e struct {
			Error struct{ Code, Type string }
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e.Error.Code
	}
	completion := `{"prompt":"hi","max_tokens":2}`
	for _, c := range []struct {
		method, path, auth, body string
		status                   int
	}{
		{"POST", "/v1/completions", "", completion, 401},
		{"POST", "/v1/completions", "Bearer k2", completion, 401},
		{"POST", "/v1/completions", "Bearer ", completion, 401},
		{"POST", "/v1/completions", "Basic k1", completion, 401},
		{"POST", "/v1/completions", "k1", completion, 401},
		{"POST", "/v1/completions", "Bearer k1", completion, 200},
		{"POST", "/v1/completions", "bearer second key", completion, 200},
		{"GET", "/v1/models", "", "", 401},
		{"GET", "/v1/nothing", "", "", 401},
		{"GET", "/v1/models", "Bearer k1", "", 200},
		{"GET", "/health", "", "", 200},
		{"GET", "/metrics", "", "", 200},
		{"POST", "/tokenize", "", `{"prompt":"hi"}`, 200},
	} {
		status, code := do(c.method, c.path, c.auth, c.body)
		assert.Equal(t, c.status, status, "%s %s %q", c.method, c.path, c.auth)
		if c.status == 401 {
			assert.Equal(t, "invalid_api_key", code, "%s %s %q", c.method, c.path, c.auth)
		}
	}

	// The official SDK sends its key as a bearer token.
	client := sdk.NewClient(option.WithBaseURL(ms.srv.URL+"/v1/"), option.WithAPIKey("k1"),
		option.WithHTTPClient(ms.client), option.WithMaxRetries(0))
	_, err := client.Models.List(context.Background())
	require.NoError(t, err)
	bad := sdk.NewClient(option.WithBaseURL(ms.srv.URL+"/v1/"), option.WithAPIKey("wrong"),
		option.WithHTTPClient(ms.client), option.WithMaxRetries(0))
	_, err = bad.Models.List(context.Background())
	var apiErr *sdk.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, 401, apiErr.StatusCode)

	open := httptest.NewServer(NewHandler(ms.eng, WithAPIKeys("", "")))
	defer open.Close()
	resp, err := open.Client().Get(open.URL + "/v1/models")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode, "only empty keys: no check")
}

// TestAPIKeysGivenTwice: as Option says, a second WithAPIKeys replaces the
// first list rather than adding to it.
func TestAPIKeysGivenTwice(t *testing.T) {
	ms := newMockServer(t, mock.Config{}, engine.Config{}, WithAPIKeys("old"), WithAPIKeys("new"))
	for key, want := range map[string]int{"old": 401, "new": 200} {
		req, err := http.NewRequest("GET", ms.srv.URL+"/v1/models", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := ms.client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, want, resp.StatusCode, "key %q", key)
	}
}
