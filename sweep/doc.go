// Package sweep measures an OpenAI-compatible completions endpoint and keeps
// evidence anyone can audit. A URL whose path ends in /chat/completions is
// spoken to in the chat API instead (loadgen.APIForURL).
//
// It has three layers:
//
//   - the load generator, package [github.com/tinyserve/tinyserve/sweep/loadgen]
//     (loadgen.RunCondition): one condition, a closed loop at a fixed
//     concurrency (or an open loop with seeded Poisson arrivals) over the
//     first N rows of a prompt file, writing one JSONL record per request as
//     it finishes and a summary; it imports nothing from this package;
//   - the sweep runner ([RunSweep]): seed-shuffled concurrency levels, warmup
//     rounds that are excluded from every aggregate, measured repeats, and
//     resume rules that never overwrite evidence;
//   - the analysis and reports ([Aggregate], [Saturation], report.md,
//     summary.csv, the plot, [Compare]).
//
// File names, record fields and summary keys follow the serving-inference
// Python tool (DanLoran/serving-inference, scripts/send_requests.py and
// scripts/run_experiment.py), schema 1.0, so that files written by either tool
// can be read by the other; tinyserve adds fields but never changes the
// meaning of one.
//
// The package only speaks HTTP: for an in-process target, cmd/sweep starts the
// server and hands the runner its URL. The statistics (loadgen.Percentile,
// loadgen.Distribute, [Saturation]) are pure functions of the values passed in.
package sweep
