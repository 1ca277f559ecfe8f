package report

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/tinyserve/tinyserve/sweep/analysis"
	"github.com/tinyserve/tinyserve/sweep/loadgen"
)

// Markdown renders report.md.
func Markdown(c *analysis.Combined) string {
	var b strings.Builder
	name := ""
	if m, ok := c.Config.(map[string]any); ok {
		name, _ = m["name"].(string)
	}
	fmt.Fprintf(&b, "# Sweep report: %s\n\n", name)
	switch len(c.ServerVersions) {
	case 0:
	case 1:
		fmt.Fprintf(&b, "Server version (its GET /version): %s.\n\n", mdCode(c.ServerVersions[0]))
	default:
		vs := make([]string, len(c.ServerVersions))
		for i, v := range c.ServerVersions {
			vs[i] = mdCode(v)
		}
		fmt.Fprintf(&b, "**Warning: the server's version changed between runs** (its GET /version said %s): "+
			"these rows mix measurements of different software; measure afresh with --output-root.\n\n", strings.Join(vs, ", "))
	}
	b.WriteString(apiLine(c))
	if c.Checkpoint != nil {
		fmt.Fprintf(&b, "Model files (the embedded target's): %s.\n\n", describeCheckpoint(c.Checkpoint))
	}
	if len(c.SessionChanges) > 0 {
		fmt.Fprintf(&b, "**Warning: the sweep was resumed with different software or hardware** (%s): "+
			"these rows mix measurements of different set-ups (each run summary's config.session says which invocation measured it, and manifest.json's resumes, or tinyserve-sessions.json in a folder serving-inference began, describe them); measure afresh with --output-root.\n\n",
			strings.Join(c.SessionChanges, "; "))
	}
	b.WriteString("Warmups are excluded. Each row aggregates every measured repeat at one concurrency level; ")
	b.WriteString("\"median repeat\" columns are medians over repeats of each repeat's own figure.\n\n")
	b.WriteString("\"Mean in flight\" is the number of requests the client had in flight, averaged over the level's runs; " +
		"the spread columns give the lowest and highest repeat's figure.\n\n")
	b.WriteString("| Concurrency | Repeats | Successful | Failed | Mean in flight | Requests/s | Output tokens/s | Median repeat output tokens/s | Repeat output tokens/s (min–max) | Median repeat P99 latency (s) | Repeat P99 latency (min–max, s) | P50 latency (s) | P50 TTFT (s) | P50 TPOT (s) |\n")
	b.WriteString("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, a := range c.ByConcurrency {
		fmt.Fprintf(&b, "| %d | %d | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			a.Concurrency, a.Repeats, a.Counts.Successful, a.Counts.Failed, fmtNum(a.MeanInFlight, "%.1f"),
			fmtNum(a.RequestThroughput, "%.3f"), fmtNum(a.OutputTokenThroughput, "%.3f"),
			fmtNum(a.RepeatMedians.OutputTokenThroughput, "%.3f"), fmtRange(a.RepeatValues.OutputTokenThroughput, "%.1f"),
			fmtNum(a.RepeatMedians.LatencyP99S, "%.3f"), fmtRange(a.RepeatValues.LatencyP99S, "%.3f"),
			fmtNum(a.LatencyS.P50, "%.3f"), fmtNum(a.TTFTS.P50, "%.4f"), fmtNum(a.TPOTS.P50, "%.4f"))
	}
	writeLoadWarnings(&b, c)
	var noUsage []string
	for _, a := range c.ByConcurrency {
		if w := a.Counts.UsageWarning(); w != "" {
			noUsage = append(noUsage, fmt.Sprintf("- concurrency %d: %s.\n", a.Concurrency, w))
		}
	}
	if len(noUsage) > 0 {
		b.WriteString("\n**Warning: missing token usage.** Output tokens are taken only from the server's usage report, never counted from chunks. " +
			"The client asks for it (stream_options.include_usage when streaming); this server did not always send it, so read the output-token figures with care:\n\n")
		b.WriteString(strings.Join(noUsage, ""))
	}
	var cached []string
	for _, a := range c.ByConcurrency {
		if r := a.PrefixCacheHitRate; r != nil && *r >= 0.01 {
			cached = append(cached, fmt.Sprintf("- concurrency %d: %.0f%%.\n", a.Concurrency, *r*100))
		}
	}
	if len(cached) > 0 {
		b.WriteString("\n**Note: prefix cache.** The server's metrics say that its prefix cache supplied this share of the prompt tokens it looked up; " +
			"their prefill was not computed, so TTFT and throughput are better than a cold cache gives. " +
			"A sweep that sends one prompt file at every level and repeat reuses it from the first run on; " +
			"turn the cache off (vLLM: --no-enable-prefix-caching; tinyserve: leave out --enable-prefix-caching) to measure prefill every time:\n\n")
		b.WriteString(strings.Join(cached, ""))
	}
	writeGoodput(&b, c.ByConcurrency)
	writeServerPhases(&b, c.ByConcurrency)
	s := c.Saturation
	b.WriteString("\n## Saturation\n\n")
	if s.Candidate != nil {
		fmt.Fprintf(&b, "Candidate saturation concurrency: **%d**\n\n", *s.Candidate)
	} else {
		b.WriteString("Candidate saturation concurrency: not demonstrated\n\n")
	}
	fmt.Fprintf(&b, "A transition between adjacent levels qualifies when the median output-token throughput gains less than %.0f%% "+
		"and the median p99 latency rises by at least %.0f%%; the candidate is the level between the first %d successive qualifying transitions "+
		"(serving-inference's rule).\n\n",
		s.ThroughputGainThreshold*100, s.P99RiseThreshold*100, s.RequiredTransitions)
	if len(s.Transitions) > 0 {
		b.WriteString("| From | To | Throughput change | P99 latency change | Qualifies |\n| ---: | ---: | ---: | ---: | :---: |\n")
		for _, t := range s.Transitions {
			q := "no"
			if t.Qualifies {
				q = "yes"
			}
			fmt.Fprintf(&b, "| %d | %d | %s | %s | %s |\n", t.FromConcurrency, t.ToConcurrency, fmtPct(t.ThroughputChange), fmtPct(t.P99Change), q)
		}
		b.WriteString("\n")
	}
	writeNoiseWarning(&b, c.ByConcurrency, s.ThroughputGainThreshold)
	b.WriteString("This plateau is client-observed: throughput and latency were measured by the load client over HTTP. " +
		"It shows where adding concurrency stopped paying off for this workload, server configuration and machine, " +
		"and is not proof that the device itself is saturated (the limit may be the scheduler's max_num_seqs, " +
		"the KV cache, the network, the client or the CPU). Check the server's metrics beside each run.\n\n")
	b.WriteString("## Definitions\n\n" +
		"- Latency: end of the response minus the time the request was sent (time waiting for a client concurrency slot is excluded and reported as client_queue_s).\n" +
		"- TTFT: arrival of the first SSE event with non-empty text minus the send time.\n" +
		"- Approximate TPOT: (last text event - first text event) / (output tokens - 1).\n" +
		"- Inter-chunk gaps are gaps between SSE text events (chunks), not between tokens.\n" +
		"- Output tokens come from the server's usage report.\n\n")
	b.WriteString("Files: `summary.json` (all figures), `summary.csv`, `plot.png`/`plot.svg`, `manifest.json`, per-run evidence under `repeat-NN/`, `warmup-NN/` and `resume-warmup-NN/`.\n")
	return b.String()
}

func fmtNum(v *float64, format string) string {
	if v == nil || math.IsNaN(*v) {
		return "n/a"
	}
	return fmt.Sprintf(format, *v)
}

func fmtPct(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f%%", *v*100)
}

// writeGoodput writes the goodput table, when the runs had an SLO.
func writeGoodput(b *strings.Builder, levels []analysis.LevelAggregate) {
	var slo *loadgen.SLO
	for _, a := range levels {
		if a.Goodput != nil {
			slo = &a.Goodput.SLO
			break
		}
	}
	if slo == nil {
		return
	}
	var objectives []string
	for _, o := range []struct {
		name string
		v    float64
	}{{"TTFT", slo.TTFTS}, {"TPOT", slo.TPOTS}, {"latency", slo.LatencyS}} {
		if o.v > 0 {
			objectives = append(objectives, fmt.Sprintf("%s ≤ %g s", o.name, o.v))
		}
	}
	fmt.Fprintf(b, "\n## Goodput\n\nRequests that succeeded and met every objective (%s), over every measured repeat at the level.\n\n", strings.Join(objectives, ", "))
	b.WriteString("| Concurrency | Meeting the SLO | Goodput requests/s | Goodput output tokens/s |\n| ---: | ---: | ---: | ---: |\n")
	for _, a := range levels {
		g := a.Goodput
		if g == nil {
			fmt.Fprintf(b, "| %d | n/a | n/a | n/a |\n", a.Concurrency)
			continue
		}
		share := "n/a"
		if g.Fraction != nil {
			share = fmt.Sprintf("%d of %d (%.0f%%)", g.Met, a.Counts.Attempted, *g.Fraction*100)
		}
		fmt.Fprintf(b, "| %d | %s | %s | %s |\n", a.Concurrency, share, fmtNum(g.RequestsPerS, "%.3f"), fmtNum(g.OutputTokensPer, "%.3f"))
	}
}

// rangeOf is the lowest and highest of vs; ok is false without any.
func rangeOf(vs []*float64) (lo, hi float64, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range vs {
		if v != nil && !math.IsNaN(*v) {
			lo, hi = min(lo, *v), max(hi, *v)
		}
	}
	return lo, hi, lo <= hi
}

// fmtRange is the lowest and highest of vs ("n/a" without any).
func fmtRange(vs []*float64, format string) string {
	lo, hi, ok := rangeOf(vs)
	if !ok {
		return "n/a"
	}
	return fmt.Sprintf(format+"–"+format, lo, hi)
}

// noisySpread is how far apart, as a multiple of the saturation rule's
// throughput-gain threshold, a level's fastest and slowest repeats may be
// before the report says a transition's verdict there may be noise.
const noisySpread = 2

// noisyLevel is a concurrency level whose repeats disagree by more than
// the saturation rule can resolve: its fastest and slowest repeat's
// output-token throughput (Low, High) are more than twice the rule's gain
// threshold of the median apart (Spread, a fraction of the median).
type noisyLevel struct {
	Concurrency       int
	Low, High, Spread float64
}

// noisyLevels returns the levels, in ascending concurrency, whose
// repeats disagree by more than the saturation rule can resolve: the rule
// compares medians against a gain of a few percent, which repeats 30% apart
// cannot settle. Levels with fewer than two repeats are never named.
func noisyLevels(levels []analysis.LevelAggregate, gain float64) []noisyLevel {
	var noisy []noisyLevel
	for _, a := range levels {
		lo, hi, ok := rangeOf(a.RepeatValues.OutputTokenThroughput)
		med := a.RepeatMedians.OutputTokenThroughput
		if a.Repeats < 2 || !ok || med == nil || *med <= 0 {
			continue
		}
		if spread := (hi - lo) / *med; spread > noisySpread*gain {
			noisy = append(noisy, noisyLevel{Concurrency: a.Concurrency, Low: lo, High: hi, Spread: spread})
		}
	}
	return noisy
}

// writeNoiseWarning names the levels noisyLevels finds, if any.
func writeNoiseWarning(b *strings.Builder, levels []analysis.LevelAggregate, gain float64) {
	noisy := noisyLevels(levels, gain)
	if len(noisy) == 0 {
		return
	}
	fmt.Fprintf(b, "**Warning: repeats disagree.** At these levels the fastest and slowest repeat's output-token throughput differ by more than %.0f%% of the median, "+
		"while the rule above tests a %.0f%% gain: a transition's verdict there may be noise (other load on the machine, the client, "+
		"frequency scaling). Add repeats, or measure on a quieter machine:\n\n", noisySpread*gain*100, gain*100)
	for _, n := range noisy {
		fmt.Fprintf(b, "- concurrency %d: %.1f–%.1f output tokens/s (%.0f%% of the median).\n", n.Concurrency, n.Low, n.High, n.Spread*100)
	}
	b.WriteString("\n")
}

// heldShare is the least mean-in-flight, as a share of the concurrency,
// at which a closed-loop level counts as held.
const heldShare = 0.9

// writeLoadWarnings warns about levels whose load was not what the table
// says: the closed loop did not hold its concurrency, or connections were
// opened during the measured runs.
func writeLoadWarnings(b *strings.Builder, c *analysis.Combined) {
	numRequests := 0
	if m, ok := c.Config.(map[string]any); ok {
		// A float64 when read back from summary.json, a json.Number as
		// the sweep resolved it (numbers kept exact).
		switch n := m["num_requests"].(type) {
		case float64:
			numRequests = int(n)
		case json.Number:
			if v, err := n.Int64(); err == nil {
				numRequests = int(v)
			}
		}
	}
	var notHeld, reopened, heldOpen []string
	for _, a := range c.ByConcurrency {
		// A sweep's runs are closed loops: a level should hold its
		// concurrency for most of the run.
		if a.MeanInFlight != nil && *a.MeanInFlight < heldShare*float64(a.Concurrency) {
			notHeld = append(notHeld, fmt.Sprintf("- concurrency %d: %.1f in flight on average (%.0f%%).\n",
				a.Concurrency, *a.MeanInFlight, 100**a.MeanInFlight/float64(a.Concurrency)))
		}
		if a.Counts.HeldOpen > 0 {
			heldOpen = append(heldOpen, fmt.Sprintf("- concurrency %d: %d of %d responses.\n", a.Concurrency, a.Counts.HeldOpen, a.Counts.Attempted))
		}
		// Each of a level's slots may open a connection once per session
		// (the pool grows to the highest level measured so far, and each
		// invocation starts a new pool); more means connections were closed
		// and reopened.
		if a.Counts.NewConnections > a.Concurrency*max(a.Sessions, 1) {
			reopened = append(reopened, fmt.Sprintf("- concurrency %d: %d requests opened a connection over %d repeats.\n",
				a.Concurrency, a.Counts.NewConnections, a.Repeats))
		}
	}
	if len(notHeld) > 0 {
		per := ""
		if numRequests > 0 {
			per = fmt.Sprintf(" (%d requests per run)", numRequests)
		}
		fmt.Fprintf(b, "\n**Warning: concurrency not held.** At these levels the client had, on average, fewer than %.0f%% of the level's requests in flight%s: "+
			"ramp-up and drain are a large share of a run with few requests per slot, or the client could not keep up. "+
			"Their throughput is understated and they compare poorly with the others; send at least 10 times the highest level's requests per run:\n\n",
			heldShare*100, per)
		b.WriteString(strings.Join(notHeld, ""))
	}
	if len(heldOpen) > 0 {
		b.WriteString("\n**Warning: responses held open after [DONE].** The server (or a proxy) did not end these streams within 100 ms of data: [DONE]; " +
			"the client closed them, losing their connections, and the wait fell between requests: throughput is understated, latencies are not (see each record's held_open_after_done):\n\n")
		b.WriteString(strings.Join(heldOpen, ""))
	}
	if len(reopened) > 0 {
		b.WriteString("\n**Warning: connections reopened.** More requests opened a connection than the level has slots (in each session that measured it), so connection set-up " +
			"(TCP, perhaps TLS) fell inside some measured latencies; the server may close idle connections between runs (see each record's connection_reused):\n\n")
		b.WriteString(strings.Join(reopened, ""))
	}
}

// mdCode writes a string from the server as a Markdown code span, so that
// nothing in it is read as Markdown.
func mdCode(v string) string {
	return "`" + strings.NewReplacer("`", "'", "\n", " ", "\r", " ").Replace(v) + "`"
}

// apiLine says which API the sweep spoke, from its resolved config; ""
// when the config does not record it.
func apiLine(c *analysis.Combined) string {
	m, _ := c.Config.(map[string]any)
	switch api, _ := m["api"].(string); loadgen.API(api) {
	case loadgen.APIChat:
		return "API: `chat` (each prompt sent as one user message to the url's /chat/completions; the server's chat template adds prompt tokens).\n\n"
	case loadgen.APICompletions:
		return "API: `completions` (each prompt sent as is).\n\n"
	}
	return ""
}

// writeServerPhases adds the server's own account of where the time went,
// beside the client's TTFT, when the server reports its phase histograms.
func writeServerPhases(b *strings.Builder, levels []analysis.LevelAggregate) {
	reported := false
	for _, a := range levels {
		reported = reported || a.ServerPhases != nil
	}
	if !reported {
		return
	}
	b.WriteString("\n## Where the time went, by the server's metrics\n\n")
	b.WriteString("Means per request from the server's own histograms (vllm:request_queue_time_seconds, _prefill_time_seconds, _decode_time_seconds: " +
		"queue is arrival to first scheduled, prefill first scheduled to first token, decode first to last token), beside the client's mean TTFT and latency. " +
		"Client TTFT beyond queue + prefill is HTTP, tokenization and streaming overhead; a growing queue time is requests waiting for a batch slot.\n\n")
	b.WriteString("| Concurrency | Queue (s) | Prefill (s) | Decode (s) | Client mean TTFT (s) | Client mean latency (s) |\n")
	b.WriteString("| ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, a := range levels {
		p := a.ServerPhases
		if p == nil {
			p = &analysis.ServerPhases{}
		}
		fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %s |\n", a.Concurrency,
			fmtNum(p.QueueS, "%.4f"), fmtNum(p.PrefillS, "%.4f"), fmtNum(p.DecodeS, "%.4f"),
			fmtNum(a.TTFTS.Mean, "%.4f"), fmtNum(a.LatencyS.Mean, "%.4f"))
	}
}
