// Package analysis is the sweep's statistics over finished runs: it
// aggregates the measured repeats of each concurrency level (pooled figures
// and medians of the repeats' own figures, warmups excluded), finds the
// candidate saturation concurrency by serving-inference's rule, and compares
// two sweeps level by level. Its [Combined] is a sweep's summary.json.
//
// It works on what the load generator (package
// [github.com/tinyserve/tinyserve/sweep/loadgen]) measured: [Aggregate],
// [Saturation] and [Compare] are pure functions of the values passed in, and
// [ReadCombined] reads a summary.json back (with the workload the
// manifest.json beside it records). Its types include what summary.json
// carries from the runner: the runs' names ([RunSpec]), the prompt file
// ([Workload]) and the model files ([Checkpoint]). It imports neither
// the reports (package [github.com/tinyserve/tinyserve/sweep/report]) nor the
// runner (package [github.com/tinyserve/tinyserve/sweep]), which build on it.
package analysis
