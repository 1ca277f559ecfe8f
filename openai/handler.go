// Package openai serves an [llm.Engine] over HTTP with the OpenAI completions
// API as vLLM speaks it: POST /v1/completions (JSON and SSE streaming), GET
// /v1/models and /v1/models/{model}, GET /health, GET /version, GET /metrics,
// POST /tokenize and POST /detokenize.
//
// Field names, defaults, error shapes and metric names follow vLLM where vLLM
// has them, so that existing OpenAI clients, benchmark tools and vLLM
// dashboards work unchanged. [NewHandler] returns a plain [http.Handler] with
// its own mux, so a Go service can mount it anywhere in its own routing
// (under a prefix with [http.StripPrefix]) behind its own middleware.
package openai

import (
	"crypto/sha256"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/chat/reasoning"
	"github.com/tinyserve/tinyserve/llm/chat/toolcall"
)

// Defaults of the options; each option's doc says what zero means.
const (
	// DefaultMaxBodyBytes bounds a request body: a prompt of a few hundred
	// thousand token ids written as JSON fits.
	DefaultMaxBodyBytes = 4 << 20
	// DefaultStreamWriteTimeout is how long one response write (one SSE
	// event, or a whole JSON body) may take before the client is dropped.
	DefaultStreamWriteTimeout = 30 * time.Second
	// MaxN bounds n, the number of choices per prompt.
	MaxN = 128
	// MaxChoices bounds the number of sequences one request may start
	// (prompts times n), so one request cannot flood the engine's queue.
	MaxChoices = 1024
)

// Option configures [NewHandler]. Options apply in order, and a later one
// replaces what an earlier one of its kind set: two WithAPIKeys or two
// WithServedModelNames do not add up, the last list is the one in force.
type Option func(*config)

type config struct {
	names        []string
	maxPending   int
	maxBodyBytes int64
	writeTimeout time.Duration
	logger       *slog.Logger
	registerer   prometheus.Registerer
	gatherer     prometheus.Gatherer
	apiKeys      [][sha256.Size]byte // SHA-256 of each accepted key (WithAPIKeys)
	noAccessLog  bool                // WithAccessLog(false)
	accessLogger *slog.Logger        // WithAccessLogger; nil means logger
	// The chat endpoint's (WithChatTemplate, WithToolCallParser,
	// WithReasoningParser).
	chatTemplate    ChatTemplate
	chatVars        map[string]any
	toolParser      func() toolcall.Parser
	autoToolChoice  bool
	reasoningParser func() reasoning.Parser
}

// WithServedModelNames sets the names clients may put in "model" (vLLM's
// --served-model-name). The first is the one responses and the model_name
// metric label carry. Without it the engine's ModelInfo.ID is the only name.
func WithServedModelNames(names ...string) Option {
	return func(c *config) {
		c.names = nil
		for _, n := range names {
			if n != "" {
				c.names = append(c.names, n)
			}
		}
	}
}

// WithMaxPending bounds the sequences (prompts times n) the handler has
// submitted to the engine and not yet seen finish, queued or running. A
// request that would exceed it gets 429 with Retry-After at once, without
// touching the engine; one that needs more sequences than n alone gets 400.
// Zero or negative means no bound here (the engine's own queue bound still
// answers 429 through llm.ErrOverloaded; see [QueueBounder]).
func WithMaxPending(n int) Option { return func(c *config) { c.maxPending = n } }

// WithMaxBodyBytes bounds a request body; a larger one gets 413. Zero or
// negative means [DefaultMaxBodyBytes].
func WithMaxBodyBytes(n int64) Option { return func(c *config) { c.maxBodyBytes = n } }

// WithStreamWriteTimeout sets how long each response write may take: the
// write deadline is pushed this far forward before every SSE event (and
// before a JSON body), so a client that stops reading is dropped and its
// request aborted instead of holding engine capacity. Zero or negative means
// [DefaultStreamWriteTimeout].
func WithStreamWriteTimeout(d time.Duration) Option { return func(c *config) { c.writeTimeout = d } }

// WithLogger sets the logger; every line about a request carries its
// request_id. Nil or absent means logging is discarded.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithAccessLog turns the access log, one info line "http request" per
// request, on (the default) or off (vLLM's --disable-uvicorn-access-log).
// The handler's other lines are logged either way.
func WithAccessLog(on bool) Option { return func(c *config) { c.noAccessLog = !on } }

// WithAccessLogger gives the access lines a logger of their own, so that
// they can have their own level or destination, as uvicorn's access log has
// in vLLM (--uvicorn-log-level apart from vLLM's own level). Nil or absent
// means the handler's logger ([WithLogger]).
func WithAccessLogger(l *slog.Logger) Option { return func(c *config) { c.accessLogger = l } }

// WithRegistry sets where the handler registers its metrics and what GET
// /metrics gathers. Without this option each handler gets a fresh
// prometheus.NewRegistry() for both, so two handlers in one process never
// collide. A nil gatherer means reg itself when it is one (a
// *prometheus.Registry), else /metrics serves nothing (the host serves its
// metrics); a nil reg means a private registry. Metrics are registered with a model_name label (the first
// served name), so several handlers can share one registry.
func WithRegistry(reg prometheus.Registerer, g prometheus.Gatherer) Option {
	return func(c *config) { c.registerer, c.gatherer = reg, g }
}

// QueueBounder is an optional interface of an [llm.Engine] whose waiting
// queue is bounded: Generate returns llm.ErrOverloaded once MaxPending
// requests wait to run. The handler submits a request's choices (prompts
// times n) one engine request each, all at once, so a request with more
// choices than MaxPending would get 429 however idle the engine, and a
// client retrying it would loop forever; an engine that reports its bound
// lets the handler answer 400 instead, naming n. Zero or negative means no
// bound.
type QueueBounder interface {
	MaxPending() int
}

// handler serves one engine. Its fields are set once in NewHandler; the only
// state that changes afterwards is the pending count and the metrics.
type handler struct {
	eng   llm.Engine
	info  llm.ModelInfo
	tok   llm.Tokenizer
	names []string
	// pathName is the checkpoint folder's path as the engine was given it,
	// accepted in "model" besides names (see NewHandler); "" when none.
	pathName string
	created  int64
	cfg      config
	m        *metrics
	pending  atomic.Int64
	// engineQueue is the engine's waiting-queue bound when it reports one
	// (QueueBounder), else 0.
	engineQueue int
}

// NewHandler returns an http.Handler serving eng with the OpenAI completions
// API. The handler does not own the engine: draining and closing it is the
// caller's job (see cmd/serve).
func NewHandler(eng llm.Engine, opts ...Option) http.Handler {
	cfg := config{}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.maxBodyBytes <= 0 {
		cfg.maxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.writeTimeout <= 0 {
		cfg.writeTimeout = DefaultStreamWriteTimeout
	}
	if cfg.logger == nil {
		cfg.logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case cfg.registerer == nil && cfg.gatherer == nil:
		reg := prometheus.NewRegistry()
		cfg.registerer, cfg.gatherer = reg, reg
	case cfg.registerer == nil:
		cfg.registerer = prometheus.NewRegistry() // kept, but only the given gatherer is served
	case cfg.gatherer == nil:
		if g, ok := cfg.registerer.(prometheus.Gatherer); ok { // a *prometheus.Registry
			cfg.gatherer = g
		} else {
			cfg.gatherer = prometheus.Gatherers{} // the host serves its metrics itself
		}
	}
	info := eng.Info()
	names := cfg.names
	if len(names) == 0 {
		names = []string{info.ID}
	}
	h := &handler{
		eng:     eng,
		info:    info,
		tok:     eng.Tokenizer(),
		names:   names,
		created: time.Now().Unix(),
		cfg:     cfg,
	}
	if src := info.Source; len(cfg.names) == 0 && info.Root == "" && src != nil && src.HubID == "" && src.Dir != info.ID {
		// vLLM serves a folder under the path it was given (vllm serve
		// ./ckpt serves "./ckpt"), and its benchmark client sends that
		// path as the model, so tinyserve, which serves the folder's
		// name, takes the path too. A served name given explicitly
		// replaces both, as in vLLM.
		h.pathName = src.Dir
	}
	h.m = newMetrics(cfg.registerer, names[0], eng, cfg.logger)
	if qb, ok := eng.(QueueBounder); ok {
		h.engineQueue = qb.MaxPending()
	}

	mux := http.NewServeMux()
	for _, rt := range []struct {
		method, path string
		h            http.Handler
	}{
		{http.MethodPost, "/v1/completions", http.HandlerFunc(h.completions)},
		{http.MethodPost, "/v1/chat/completions", http.HandlerFunc(h.chatCompletions)},
		{http.MethodGet, "/v1/models", http.HandlerFunc(h.models)},
		// {model...}: served names may hold slashes (openai-community/gpt2).
		{http.MethodGet, "/v1/models/{model...}", http.HandlerFunc(h.model)},
		{http.MethodGet, "/health", http.HandlerFunc(h.health)},
		{http.MethodGet, "/version", http.HandlerFunc(h.version)},
		{http.MethodGet, "/metrics", h.m.handler(cfg.gatherer)},
		{http.MethodPost, "/tokenize", http.HandlerFunc(h.tokenize)},
		{http.MethodPost, "/detokenize", http.HandlerFunc(h.detokenize)},
	} {
		mux.Handle(rt.method+" "+rt.path, rt.h)
		// The same path with another method answers 405 in the OpenAI
		// error shape rather than the mux's plain text.
		allow := rt.method
		if allow == http.MethodGet {
			allow = "GET, HEAD" // a GET pattern serves HEAD too
		}
		mux.Handle(rt.path, methodNotAllowed(allow))
	}
	mux.HandleFunc("/", notFound) // anything else is a JSON 404
	return withRequestID(cfg.logger, cfg.accessLogger, !cfg.noAccessLog, requireAPIKey(cfg.apiKeys, cleanPaths(mux)))
}

// isServed reports whether name may be used in "model": a served name, the
// folder path of a model served under its folder's name (pathName), or
// empty, meaning the default (first) served name, as vLLM allows.
func (h *handler) isServed(name string) bool {
	if name == "" || name == h.pathName {
		return true
	}
	for _, n := range h.names {
		if n == name {
			return true
		}
	}
	return false
}

// checkModel writes the 404 for an unknown model and reports whether the
// request may continue.
func (h *handler) checkModel(w http.ResponseWriter, r *http.Request, name string) bool {
	if h.isServed(name) {
		return true
	}
	writeError(w, r, errModelNotFound(name))
	return false
}

// modelName is what a response's "model" says: the first served name, as
// vLLM answers whichever of its names was asked for; but a folder's path
// (the one name that is not in h.names) is answered as asked, since vLLM
// serves the folder under that path and would answer with it.
func (h *handler) modelName(asked string) string {
	if asked != "" && !slices.Contains(h.names, asked) {
		return asked
	}
	return h.names[0]
}

type modelCard struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	Root        string `json:"root"`
	MaxModelLen int    `json:"max_model_len"`
	// RandomWeights is a tinyserve extension: true for built-in models whose
	// generated weights make their text meaningless, so nobody mistakes them
	// for a trained model.
	RandomWeights bool `json:"random_weights,omitempty"`
}

type modelList struct {
	Object string      `json:"object"`
	Data   []modelCard `json:"data"`
}

func (h *handler) models(w http.ResponseWriter, r *http.Request) {
	list := modelList{Object: "list", Data: make([]modelCard, 0, len(h.names))}
	for _, n := range h.names {
		list.Data = append(list.Data, h.card(n))
	}
	h.writeJSON(w, r, http.StatusOK, list)
}

// model answers OpenAI's "retrieve model" (GET /v1/models/{model}) with the
// card /v1/models lists for that name, or OpenAI's 404 for any other name,
// so an SDK's models.retrieve works. vLLM does not serve this route.
func (h *handler) model(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("model")
	if name == "" { // "/v1/models/": no model named
		notFound(w, r)
		return
	}
	if !h.checkModel(w, r, name) {
		return
	}
	h.writeJSON(w, r, http.StatusOK, h.card(name))
}

// card describes the engine's model under the served name n.
func (h *handler) card(n string) modelCard {
	root := h.info.Root
	if root == "" {
		root = h.info.ID
	}
	return modelCard{
		ID: n, Object: "model", Created: h.created, OwnedBy: "tinyserve",
		Root: root, MaxModelLen: h.info.MaxModelLen, RandomWeights: h.info.RandomWeights,
	}
}

type healthBody struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// health answers 200 while the engine admits requests and 503 with the reason
// otherwise, so a load balancer's readiness probe stops sending traffic as
// soon as a drain starts.
func (h *handler) health(w http.ResponseWriter, r *http.Request) {
	err := h.eng.Health()
	if err == nil {
		h.writeJSON(w, r, http.StatusOK, healthBody{Status: "ok"})
		return
	}
	status := "unavailable"
	switch {
	case errors.Is(err, llm.ErrDraining):
		status = "draining"
	case errors.Is(err, llm.ErrEngineDead):
		status = "dead"
	case errors.Is(err, llm.ErrClosed):
		status = "closed"
	}
	h.writeJSON(w, r, http.StatusServiceUnavailable, healthBody{Status: status, Reason: err.Error()})
}

// methodNotAllowed answers 405 with the Allow header RFC 9110 requires, so
// a client can tell which method the path takes.
func methodNotAllowed(allow string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeError(w, r, &apiError{
			status: http.StatusMethodNotAllowed, Type: typeInvalidRequest, Code: "method_not_allowed",
			Message: "method " + r.Method + " is not allowed on " + r.URL.Path + "; use " + allow,
		})
	})
}

func notFound(w http.ResponseWriter, r *http.Request) {
	msg := "no route for " + r.Method + " " + r.URL.Path
	writeError(w, r, &apiError{
		status: http.StatusNotFound, Type: typeInvalidRequest, Code: "not_found",
		Message: msg,
	})
}
