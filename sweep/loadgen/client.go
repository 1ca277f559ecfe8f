package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/tinyserve/tinyserve/internal/pyrandom"
)

// job is one request to send and when it became eligible to be sent.
type job struct {
	index    int
	row      *Row
	eligible time.Time
}

// feedJobs hands the rows to the workers in order, then closes jobs: all
// at once for a fixed concurrency, or at Poisson arrival times from
// opts.Seed (so they repeat run to run) when opts.RequestRate is set. A job's eligible
// time is when it arrived, so a wait for a free worker shows as client
// queueing. It stops early when ctx ends.
func feedJobs(ctx context.Context, opts LoadOptions, rows []Row, started time.Time, jobs chan<- job) {
	defer close(jobs)
	var arrivals *pyrandom.Rand
	if opts.RequestRate > 0 {
		arrivals = pyrandom.New(opts.Seed)
	}
	var offset float64
	for i := range rows {
		eligible := started
		if arrivals != nil {
			offset += arrivals.Expovariate(opts.RequestRate)
			eligible = started.Add(time.Duration(offset * float64(time.Second)))
			if d := time.Until(eligible); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return
				}
			}
		}
		select {
		case jobs <- job{index: i, row: &rows[i], eligible: eligible}:
		case <-ctx.Done():
			return
		}
	}
}

// sent is a worker's finished request: its record, and whether the run
// had been interrupted by the time it ended.
type sent struct {
	record      Record
	interrupted bool
}

// RunCondition runs one condition over rows: every row is sent once, records
// are written to out as JSONL in completion order (one Write per record, so
// a reader of a file never sees half a line), and the summary is returned.
// A nil out writes nothing. It returns the records too. Requests that
// failed (an HTTP error, no answer) are evidence, not an error: they are in
// the records and Summary.Counts.Failed (RunSweep is what stops on them,
// with ErrFailedRequests). When ctx ends before every request finished, it
// returns an error wrapping ctx's and the records written so far; the
// caller must not treat that as a complete run.
func RunCondition(ctx context.Context, opts LoadOptions, rows []Row, out io.Writer) (*Summary, []Record, error) {
	if err := opts.Validate(); err != nil {
		return nil, nil, err
	}
	if out == nil {
		out = io.Discard
	}
	if len(rows) == 0 {
		return nil, nil, fmt.Errorf("prompts: %w: no rows", ErrTooFewRows)
	}
	extra, _ := ExtraBodyFragment(opts.ExtraBody, opts.API())
	client := opts.Client
	if client == nil {
		client = NewHTTPClient(opts.MaxInFlight(len(rows)))
		defer client.CloseIdleConnections()
	}
	started := time.Now()
	prefix := opts.RequestIDPrefix
	if prefix == "" {
		// The start time in nanoseconds tells runs apart in a server's logs
		// without an unseeded random source.
		prefix = "sweep-" + strconv.FormatInt(started.UnixNano(), 36)
	}
	s := &sender{opts: opts, api: opts.API(), extra: extra, client: client, prefix: prefix, started: started}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Room for every record: a worker hands its record over and sends its
	// next request at once, so writing the evidence (a slow disk, a lagging
	// pipe) never holds a concurrency slot.
	results := make(chan sent, len(rows))
	jobs := make(chan job)
	var wg sync.WaitGroup

	workers := opts.Concurrency
	if opts.RequestRate > 0 && workers == 0 {
		workers = len(rows) // no cap: every arrival gets a sender at once
	}
	workers = min(workers, len(rows))
	for range workers {
		wg.Go(func() {
			for j := range jobs {
				r := s.send(ctx, j)
				// Whether the run was interrupted is decided here, when the
				// request ended, not when the collector gets to the record:
				// a record handed over just before an interruption is
				// evidence like any other.
				results <- sent{record: r, interrupted: ctx.Err() != nil}
			}
		})
	}
	go feedJobs(ctx, opts, rows, started, jobs)
	go func() { wg.Wait(); close(results) }()

	records := make([]Record, 0, len(rows))
	var writeErr error
	var line bytes.Buffer
	for res := range results {
		if res.interrupted || writeErr != nil {
			continue // these records are not evidence of the server
		}
		r := res.record
		records = append(records, r)
		line.Reset()
		enc := json.NewEncoder(&line)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(&r); err != nil {
			writeErr = err
			cancel()
			continue
		}
		if _, err := out.Write(line.Bytes()); err != nil {
			writeErr = fmt.Errorf("writing records: %w", err)
			cancel()
			continue
		}
		if opts.Progress != nil {
			opts.Progress(len(records))
		}
	}
	if writeErr != nil {
		return nil, records, writeErr
	}
	// Complete evidence is a complete run, even when ctx ended just after
	// the last request did.
	if len(records) != len(rows) {
		err := ctx.Err()
		if err == nil {
			err = context.Canceled
		}
		return nil, records, fmt.Errorf("run interrupted after %d of %d requests: %w", len(records), len(rows), err)
	}
	// The run lasts from its start to the end of its last response; the
	// time spent writing records after that is not the server's.
	var duration float64
	for i := range records {
		duration = max(duration, records[i].EndedOffsetS)
	}
	sum := Summarize(opts.SummaryConfig(len(rows)), records, duration)
	return &sum, records, nil
}
