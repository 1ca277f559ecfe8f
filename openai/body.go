package openai

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strings"
)

// readBody reads a bounded request body, writing the error answer itself.
// The body is JSON as vLLM (FastAPI) reads it: with no Content-Type, or
// application/json or any application/*+json; another type is a 400, as
// vLLM's validation answers it. Content-Encoding gzip is decompressed, the
// decompressed body bounded by the same limit (a small gzip bomb cannot
// grow past it); any other encoding is a 415.
func (h *handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !(mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
			writeError(w, r, badRequest("", "invalid_content_type",
				"the request body must be JSON (Content-Type: application/json), not %q", ct))
			return nil, false
		}
	}
	limited := http.MaxBytesReader(w, r.Body, h.cfg.maxBodyBytes)
	var body io.Reader = limited
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(limited)
		if err != nil {
			h.bodyError(w, r, fmt.Errorf("gzip: %w", err))
			return nil, false
		}
		defer zr.Close()
		body = &capReader{r: zr, left: h.cfg.maxBodyBytes, max: h.cfg.maxBodyBytes}
	default:
		writeError(w, r, &apiError{status: http.StatusUnsupportedMediaType, Type: typeInvalidRequest, Code: "unsupported_content_encoding",
			Message: fmt.Sprintf("Content-Encoding %q is not supported: send the body uncompressed or gzip-compressed", enc)})
		return nil, false
	}
	b, err := io.ReadAll(body)
	if err != nil {
		h.bodyError(w, r, err)
		return nil, false
	}
	return b, true
}

// bodyError answers a body that could not be read.
func (h *handler) bodyError(w http.ResponseWriter, r *http.Request, err error) {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		writeError(w, r, &apiError{status: http.StatusRequestEntityTooLarge, Type: typeInvalidRequest,
			Code: "body_too_large", Message: fmt.Sprintf("request body is larger than %d bytes", mbe.Limit)})
		return
	}
	writeError(w, r, badRequest("", "invalid_body", "reading the request body: %v", err))
}

// capReader reads at most left bytes and fails with *http.MaxBytesError
// past them: the decompressed body's bound.
type capReader struct {
	r    io.Reader
	left int64
	max  int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		var one [1]byte
		if n, _ := c.r.Read(one[:]); n > 0 {
			return 0, &http.MaxBytesError{Limit: c.max}
		}
		return 0, io.EOF
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// cleanPaths answers a request whose path is not clean (dot segments,
// doubled slashes) with the JSON 404 of any unknown route. Go's ServeMux
// would redirect it (307) to the cleaned path, an HTML answer outside the
// OpenAI shape that points a client somewhere it did not ask for
// (/v1/models/../../etc/passwd to /etc/passwd).
func cleanPaths(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		clean := path.Clean("/" + p)
		if strings.HasSuffix(p, "/") && clean != "/" {
			clean += "/" // a trailing slash is the route's business, as in the mux
		}
		if p != clean {
			notFound(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}
