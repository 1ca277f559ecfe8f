package openai

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(b)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// TestBodyEncodingAndType: a gzipped body is read (bounded after
// decompression), other encodings are a 415, and the Content-Type rule is
// vLLM's (FastAPI's): none or JSON is read as JSON, anything else is a
// 400. Every refusal is an OpenAI error body.
func TestBodyEncodingAndType(t *testing.T) {
	f := newFake()
	h := NewHandler(f, WithMaxBodyBytes(64<<10))
	good := []byte(`{"prompt":"hi","max_tokens":2}`)
	cases := []struct {
		name       string
		body       []byte
		header     map[string]string
		status     int
		code       string
		messageHas string
	}{
		{"no content type", good, nil, 200, "", ""},
		{"json with charset", good, map[string]string{"Content-Type": "application/json; charset=utf-8"}, 200, "", ""},
		{"a +json type", good, map[string]string{"Content-Type": "application/vnd.api+json"}, 200, "", ""},
		{"text/plain", good, map[string]string{"Content-Type": "text/plain"}, 400, "invalid_content_type", `not "text/plain"`},
		{"curl's form default", good, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 400, "invalid_content_type", "application/json"},
		{"gzip", gzipped(t, good), map[string]string{"Content-Encoding": "gzip"}, 200, "", ""},
		{"gzip ignored before", gzipped(t, good), map[string]string{"Content-Encoding": "GZIP", "Content-Type": "application/json"}, 200, "", ""},
		{"gzip bomb", gzipped(t, append([]byte(`{"prompt":"`), bytes.Repeat([]byte("a"), 1<<20)...)), map[string]string{"Content-Encoding": "gzip"}, 413, "body_too_large", "65536 bytes"},
		{"corrupt gzip", []byte("not gzip at all"), map[string]string{"Content-Encoding": "gzip"}, 400, "invalid_body", "gzip"},
		{"brotli", good, map[string]string{"Content-Encoding": "br"}, 415, "unsupported_content_encoding", `"br"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/v1/completions", bytes.NewReader(c.body))
			for k, v := range c.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			require.Equal(t, c.status, rec.Code, rec.Body.String())
			if c.status == 200 {
				return
			}
			assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
			var e errJSON
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), rec.Body.String())
			assert.Equal(t, c.code, *e.Error.Code)
			assert.Contains(t, e.Error.Message, c.messageHas)
		})
	}
	for _, path := range []string{"/tokenize", "/detokenize"} {
		req := httptest.NewRequest("POST", path, strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "text/plain")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		assert.Equal(t, 400, rec.Code, path)
		assert.Contains(t, rec.Body.String(), "invalid_content_type", path)
	}
}

// TestUncleanPathsAreJSON404: a path with dot segments or doubled slashes
// gets the JSON 404 of an unknown route, not ServeMux's 307 redirect to
// the cleaned path (HTML, and for /v1/models/../../etc/passwd, a
// redirect to /etc/passwd).
func TestUncleanPathsAreJSON404(t *testing.T) {
	h := NewHandler(newFake())
	for _, p := range []string{"/v1/models/../../etc/passwd", "/v1/models/./fake", "//v1/models", "/v1//completions", "/v1/models/.."} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", p, nil))
		assert.Equal(t, http.StatusNotFound, rec.Code, p)
		assert.Empty(t, rec.Header().Get("Location"), p)
		var e errJSON
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), "%s: %s", p, rec.Body.String())
		assert.Equal(t, "not_found", *e.Error.Code, p)
	}
	// Clean paths still route, a trailing slash included.
	for p, want := range map[string]int{"/v1/models": 200, "/v1/models/fake": 200, "/v1/models/": 404} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", p, nil))
		assert.Equal(t, want, rec.Code, p)
	}
}
