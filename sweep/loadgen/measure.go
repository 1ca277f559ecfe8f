package loadgen

import (
	"context"
	"io"
	"time"
)

// ServerMetrics asks [Measure] to keep the server's Prometheus counters
// around a condition ([RunMetrics]).
type ServerMetrics struct {
	// Interval between scrapes of /metrics while the condition runs (their
	// maxima are RunMetrics.DuringMax); zero means one second, negative
	// means no scrapes during the run.
	Interval time.Duration
	// Now stamps the scrapes; nil means time.Now.
	Now func() time.Time
}

// settleTimeout bounds the wait for a server's counters to include a run's
// last requests (settledAfter), polled every settlePoll; a server that
// counts them before answering costs one scrape.
const (
	settleTimeout = 2 * time.Second
	settlePoll    = 20 * time.Millisecond
)

// Measure measures one condition: it asks the server for its version (kept
// in the summary's config, asked each time: a server may be restarted
// between conditions), runs [RunCondition] over rows with its records
// written to out, and, when metrics is not nil, scrapes the server's
// /metrics before, during and (once its counters include the last answers)
// after the condition. It is what cmd/sendrequests and the sweep runner
// both call; the returned RunMetrics is nil when metrics is.
func Measure(ctx context.Context, opts LoadOptions, rows []Row, out io.Writer, metrics *ServerMetrics) (*Summary, []Record, *RunMetrics, error) {
	base, err := ServerBase(opts.URL)
	if err != nil {
		return nil, nil, nil, err
	}
	client := opts.Client
	if client == nil {
		client = NewHTTPClient(opts.MaxInFlight(len(rows)))
		defer client.CloseIdleConnections()
		opts.Client = client
	}
	if metrics == nil {
		opts.ServerVersion = ServerVersion(ctx, client, base, opts.APIKey)
		sum, recs, err := RunCondition(ctx, opts, rows, out)
		return sum, recs, nil, err
	}
	now := metrics.Now
	if now == nil {
		now = time.Now
	}
	rm := RunMetrics{URL: base + "/metrics"}
	rm.Before = ScrapeMetrics(ctx, client, base, opts.APIKey, now)
	opts.ServerVersion = ServerVersion(ctx, client, base, opts.APIKey)
	interval := metrics.Interval
	if interval == 0 {
		interval = time.Second
	}
	type watched struct {
		max map[string]float64
		n   int
	}
	watchDone := make(chan watched, 1)
	wctx, stopWatch := context.WithCancel(ctx)
	if interval > 0 && rm.Before.Available {
		go func() {
			m, n := watchMetrics(wctx, client, base, opts.APIKey, interval, now)
			watchDone <- watched{m, n}
		}()
	} else {
		watchDone <- watched{}
	}
	sum, recs, err := RunCondition(ctx, opts, rows, out)
	stopWatch()
	w := <-watchDone
	rm.DuringMax, rm.DuringSamples = w.max, w.n
	if len(rm.DuringMax) == 0 {
		rm.DuringMax = nil
	}
	if err != nil {
		return sum, recs, &rm, err
	}
	rm.After, rm.AfterScrapes, rm.AfterUnsettled = settledAfter(ctx, rm.Before, sum.Counts.Successful, settleTimeout, settlePoll,
		func() MetricsSnapshot { return ScrapeMetrics(ctx, client, base, opts.APIKey, now) })
	return sum, recs, &rm, nil
}
