// Package sweep runs sweeps: it measures an OpenAI-compatible completions
// endpoint at several concurrency levels and keeps evidence anyone can
// audit. A URL whose path ends in /chat/completions is spoken to in the chat
// API instead (loadgen.APIForURL).
//
// The sweep is four layers, each a package that imports only those below it
// (each package's TestStandsAlone checks its imports):
//
//   - the load generator, package [github.com/tinyserve/tinyserve/sweep/loadgen]
//     (loadgen.Measure): one condition, a closed loop at a fixed
//     concurrency (or an open loop with seeded Poisson arrivals) over the
//     first N rows of a prompt file, writing one JSONL record per request as
//     it finishes and a summary;
//   - the analysis, package [github.com/tinyserve/tinyserve/sweep/analysis]:
//     statistics over finished runs' records and summaries (per-level
//     aggregates and repeat medians, the saturation rule, the comparison of
//     two sweeps) and the summary.json they make;
//   - the reports, package [github.com/tinyserve/tinyserve/sweep/report]:
//     report.md, summary.csv, the plot, and the verdict and comparison
//     printed on a terminal, all rendered from the analysis;
//   - the runner, this package ([RunSweep]): the config, seed-shuffled
//     concurrency levels, warmup rounds that are excluded from every
//     aggregate, measured repeats, the lock, the manifest and resume rules
//     that never overwrite evidence.
//
// Below them all, sweep/internal/files, which they all share, writes the
// folder's files atomically and never over evidence.
//
// File names, record fields and summary keys follow the serving-inference
// Python tool (DanLoran/serving-inference, scripts/send_requests.py and
// scripts/run_experiment.py), schema 1.0, so that files written by either tool
// can be read by the other; tinyserve adds fields but never changes the
// meaning of one.
//
// The package only speaks HTTP: for an in-process target, cmd/sweep starts the
// server and hands the runner its URL. The statistics (loadgen.Percentile,
// loadgen.Distribute, analysis.Saturation) are pure functions of the values
// passed in.
package sweep
