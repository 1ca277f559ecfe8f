package openai

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tinyserve/tinyserve/llm"
)

// metrics are the handler's request-level metrics; engine-level ones are read
// from engine.Stats() at scrape time by engineCollector.
type metrics struct {
	success *prometheus.CounterVec
	ttft    prometheus.Histogram
	itl     prometheus.Histogram
	// tpot is vllm:time_per_output_token_seconds, which vLLM's v1 engine
	// observes like itl (per token; its Grafana dashboard plots it), and
	// requestTPOT each finished request's mean time per output token.
	tpot, requestTPOT prometheus.Histogram
	e2e               prometheus.Histogram
	queue             prometheus.Histogram
	// The phases of a finished request, as vLLM splits them: prefill from
	// first scheduled to first token, decode from first to last token,
	// inference from first scheduled to last token (preemptions included).
	prefill, decode, inference prometheus.Histogram
	// Per finished request: its prompt and generated token counts.
	promptTokens, generationTokens prometheus.Histogram
	// Per admitted request: its max_tokens (per choice) and n (per prompt).
	paramsMaxTokens, paramsN prometheus.Histogram
	// Per prompt whose choices all finished: the most tokens any generated.
	maxGenerationTokens prometheus.Histogram
}

// tokenBuckets are vLLM's build_1_2_5_buckets(max_model_len): 1, 2, 5, 10,
// 20, 50, ... up to the context length.
func tokenBuckets(maxModelLen int) []float64 {
	var out []float64
	for scale := 1; ; scale *= 10 {
		for _, m := range []int{1, 2, 5} {
			if m*scale > maxModelLen {
				return out
			}
			out = append(out, float64(m*scale))
		}
	}
}

// newMetrics registers everything through reg wrapped with the model_name
// label. A collector already registered (a second handler for the same model
// on one registry) is reused; any other registration error is logged, and the
// metric is then kept but not exported, never a panic.
func newMetrics(reg prometheus.Registerer, model string, eng llm.Engine, log *slog.Logger) *metrics {
	reg = prometheus.WrapRegistererWith(prometheus.Labels{"model_name": model}, reg)
	// Buckets as vLLM's (vllm/v1/metrics/loggers.py), so vLLM dashboards'
	// quantile panels read the same.
	ttftBuckets := []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
		0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	itlBuckets := []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
		1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	latencyBuckets := []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0,
		30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
	hist := func(name, help string, buckets []float64) prometheus.Histogram {
		return register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}), log)
	}
	m := &metrics{
		success: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vllm:request_success_total",
			Help: "Count of finished requests, by finish reason.",
		}, []string{"finished_reason"}), log),
		ttft: hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttftBuckets),
		itl:  hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", itlBuckets),
		tpot: hist("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", itlBuckets),

		requestTPOT: hist("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.", itlBuckets),
		e2e:         hist("vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", latencyBuckets),
		queue:       hist("vllm:request_queue_time_seconds", "Histogram of time spent waiting in the queue in seconds.", latencyBuckets),

		prefill:   hist("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", latencyBuckets),
		decode:    hist("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", latencyBuckets),
		inference: hist("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", latencyBuckets),

		promptTokens:     hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", tokenBuckets(eng.Info().MaxModelLen)),
		generationTokens: hist("vllm:request_generation_tokens", "Number of generation tokens processed.", tokenBuckets(eng.Info().MaxModelLen)),
		paramsMaxTokens:  hist("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", tokenBuckets(eng.Info().MaxModelLen)),
		paramsN:          hist("vllm:request_params_n", "Histogram of the n request parameter.", []float64{1, 2, 5, 10, 20}),

		maxGenerationTokens: hist("vllm:request_max_num_generation_tokens", "Histogram of maximum number of requested generation tokens.", tokenBuckets(eng.Info().MaxModelLen)),
	}
	register(reg, newEngineCollector(eng), log)
	return m
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C, log *slog.Logger) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	log.Error("registering a metric failed; it will not be exported", "err", err)
	return c
}

// observer follows one choice's events for the latency histograms.
type observer struct {
	// start is when the handler submitted the choice, by its own clock: the
	// e2e start of a choice it abandons, whose engine stamps it may never
	// see.
	start     time.Time
	lastToken time.Time
	sawFirst  bool
}

// observe records what ev tells about its request's latencies. Times come
// from the engine's stamps, so queueing in the HTTP layer does not blur them.
func (m *metrics) observe(o *observer, ev llm.Event) {
	t := ev.Times
	if !o.sawFirst && !t.FirstToken.IsZero() && !t.Arrival.IsZero() {
		o.sawFirst = true
		m.ttft.Observe(t.FirstToken.Sub(t.Arrival).Seconds())
	}
	if k := len(ev.TokenIDs); k > 0 && !ev.Time.IsZero() {
		// Tokens that arrive together share the gap since the previous ones.
		if !o.lastToken.IsZero() {
			gap := ev.Time.Sub(o.lastToken).Seconds() / float64(k)
			for range k {
				m.itl.Observe(gap)
				m.tpot.Observe(gap)
			}
		}
		o.lastToken = ev.Time
	}
	if ev.Finish == "" {
		return
	}
	switch ev.Finish {
	case llm.FinishStop, llm.FinishLength, llm.FinishAbort:
		m.success.WithLabelValues(string(ev.Finish)).Inc()
	}
	end := t.Finish
	if end.IsZero() {
		end = ev.Time
	}
	if !t.Arrival.IsZero() && !end.IsZero() {
		m.e2e.Observe(end.Sub(t.Arrival).Seconds())
	}
	if !t.Arrival.IsZero() && !t.FirstScheduled.IsZero() {
		m.queue.Observe(t.FirstScheduled.Sub(t.Arrival).Seconds())
	}
	if !t.FirstScheduled.IsZero() && !t.FirstToken.IsZero() {
		m.prefill.Observe(t.FirstToken.Sub(t.FirstScheduled).Seconds())
	}
	if !t.FirstToken.IsZero() && !o.lastToken.IsZero() {
		decode := o.lastToken.Sub(t.FirstToken).Seconds()
		m.decode.Observe(decode)
		// vLLM observes every finished request, 0 for one of a single token.
		tpot := 0.0
		if ev.CompletionTokens > 1 {
			tpot = decode / float64(ev.CompletionTokens-1)
		}
		m.requestTPOT.Observe(tpot)
	}
	if !t.FirstScheduled.IsZero() && !o.lastToken.IsZero() {
		m.inference.Observe(o.lastToken.Sub(t.FirstScheduled).Seconds())
	}
	m.promptTokens.Observe(float64(ev.PromptTokens))
	m.generationTokens.Observe(float64(ev.CompletionTokens))
}

// admitted records the parameters of one prompt of a request whose
// choices the engine all accepted: n once, as vLLM splits a list of
// prompts into requests of n choices each, and the prompt's max_tokens
// (as it ran, after maxTokensFor) once per choice.
func (m *metrics) admitted(n, maxTokens int) {
	m.paramsN.Observe(float64(n))
	for range n {
		m.paramsMaxTokens.Observe(float64(maxTokens))
	}
}

// promptsFinished records, for every prompt of a request whose choices all
// finished (none abandoned), the most tokens any of its n choices
// generated, as vLLM records it per request of n sequences. The choices of
// one prompt are contiguous (the handler submits them prompt by prompt).
func (m *metrics) promptsFinished(choices []*choice) {
	for i := 0; i < len(choices); {
		most, finished := 0, true
		j := i
		for ; j < len(choices) && choices[j].prompt == choices[i].prompt; j++ {
			finished = finished && choices[j].finish != ""
			most = max(most, choices[j].completionTokens)
		}
		if finished {
			m.maxGenerationTokens.Observe(float64(most))
		}
		i = j
	}
}

// abandoned records a choice the handler stopped reading before the engine
// said it finished: its client went away, a write to it failed, or a
// sibling choice failed. The engine's own abort event, if it sends one, is
// never read then, so without this the choice would be missing from
// request_success_total and the e2e histogram. It counts as an abort, as
// vLLM labels a request its client abandoned, and its e2e latency ends now.
func (m *metrics) abandoned(o *observer, now time.Time) {
	m.success.WithLabelValues(string(llm.FinishAbort)).Inc()
	if !o.start.IsZero() {
		m.e2e.Observe(now.Sub(o.start).Seconds())
	}
}

// engineCollector turns engine.Stats() into vLLM's engine metrics at scrape
// time: the engine stays ignorant of Prometheus, and the figures are as fresh
// as the scrape. Collect may run concurrently; Stats is safe for that.
type engineCollector struct {
	eng                                         llm.Engine
	running, waiting, kvUsage                   *prometheus.Desc
	preemptions, promptTokens, generationTokens *prometheus.Desc
	prefixQueries, prefixHits                   *prometheus.Desc
	stepTokens                                  *prometheus.Desc
}

func newEngineCollector(eng llm.Engine) *engineCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &engineCollector{
		eng:              eng,
		running:          d("vllm:num_requests_running", "Number of requests in model execution batches."),
		waiting:          d("vllm:num_requests_waiting", "Number of requests waiting to be processed."),
		kvUsage:          d("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."),
		preemptions:      d("vllm:num_preemptions_total", "Cumulative number of preemptions from the engine."),
		promptTokens:     d("vllm:prompt_tokens_total", "Number of prefill tokens processed."),
		generationTokens: d("vllm:generation_tokens_total", "Number of generation tokens processed."),
		prefixQueries:    d("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens."),
		prefixHits:       d("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens."),
		stepTokens:       d("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step."),
	}
}

// Describe implements prometheus.Collector.
func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.running, c.waiting, c.kvUsage, c.preemptions, c.promptTokens, c.generationTokens, c.prefixQueries, c.prefixHits, c.stepTokens} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.eng.Stats()
	emit := func(d *prometheus.Desc, t prometheus.ValueType, v float64) {
		m, err := prometheus.NewConstMetric(d, t, v)
		if err != nil {
			m = prometheus.NewInvalidMetric(d, err)
		}
		ch <- m
	}
	emit(c.running, prometheus.GaugeValue, float64(s.Running))
	emit(c.waiting, prometheus.GaugeValue, float64(s.Waiting))
	emit(c.kvUsage, prometheus.GaugeValue, s.KVUsage)
	emit(c.preemptions, prometheus.CounterValue, float64(s.Preemptions))
	emit(c.promptTokens, prometheus.CounterValue, float64(s.PromptTokens))
	emit(c.generationTokens, prometheus.CounterValue, float64(s.GenerationTokens))
	emit(c.prefixQueries, prometheus.CounterValue, float64(s.PrefixCacheQueries))
	emit(c.prefixHits, prometheus.CounterValue, float64(s.PrefixCacheHits))
	ch <- stepTokensHistogram(c.stepTokens, s.StepTokens)
}

// stepTokensHistogram turns the engine's per-bucket step counts into a
// Prometheus histogram, whose buckets are cumulative.
func stepTokensHistogram(d *prometheus.Desc, st llm.StepTokenCounts) prometheus.Metric {
	bounds := llm.StepTokenBounds()
	buckets := make(map[float64]uint64, len(bounds))
	var cum uint64
	for i, b := range bounds {
		cum += st.Counts[i]
		buckets[float64(b)] = cum
	}
	total := cum + st.Counts[len(bounds)]
	m, err := prometheus.NewConstHistogram(d, total, float64(st.Sum), buckets)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return m
}

// handler serves /metrics from g. Gathering errors are logged on the
// scrape's own logger, so they carry its request id.
func (m *metrics) handler(g prometheus.Gatherer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		promhttp.HandlerFor(g, promhttp.HandlerOpts{
			ErrorLog:      slogPrintln{requestLogger(r)},
			ErrorHandling: promhttp.ContinueOnError,
		}).ServeHTTP(w, r)
	})
}

// slogPrintln bridges promhttp's Println logger to slog.
type slogPrintln struct{ log *slog.Logger }

// Println implements promhttp.Logger.
func (l slogPrintln) Println(v ...any) {
	l.log.Error("serving metrics", "err", fmt.Sprint(v...))
}
