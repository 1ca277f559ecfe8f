package main

import (
	"io"
	"net/http"
)

// allowAllCORS answers browsers as `vllm serve` does by default: vLLM adds
// Starlette's CORSMiddleware with --allowed-origins, --allowed-methods and
// --allowed-headers all ["*"] and --allow-credentials off
// (vllm/entrypoints/openai/cli_args.py), so a web page on any origin may call
// the API. Without it a browser refuses to hand the page any answer, and its
// preflight OPTIONS got a 405. It wraps the whole handler, API-key check
// included: a preflight carries no Authorization header, and vLLM's key
// check lets OPTIONS through too.
func allowAllCORS(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" { // not a cross-origin request: nothing to add
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			// A preflight: every method and header is allowed, so it is
			// answered here, as Starlette answers it.
			h.Set("Access-Control-Allow-Origin", "*")
			h.Set("Access-Control-Allow-Methods", "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT")
			h.Set("Access-Control-Max-Age", "600")
			if asked := r.Header.Get("Access-Control-Request-Headers"); asked != "" {
				h.Set("Access-Control-Allow-Headers", asked)
			}
			h.Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "OK")
			return
		}
		if r.Header.Get("Cookie") != "" {
			// Starlette names the origin rather than "*" for a request
			// that carries cookies, and says the answer varies with it.
			h.Set("Access-Control-Allow-Origin", origin)
			h.Add("Vary", "Origin")
		} else {
			h.Set("Access-Control-Allow-Origin", "*")
		}
		next.ServeHTTP(w, r)
	})
}
