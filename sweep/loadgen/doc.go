// Package loadgen is the sweep's load generator: it measures one condition
// of an OpenAI-compatible endpoint and keeps the evidence. [RunCondition]
// drives a closed loop at a fixed concurrency (or an open loop with seeded
// Poisson arrivals) over the first N rows of a prompt file ([ReadRows]),
// speaks the completions or the chat API ([APIForURL]), parses SSE streams
// ([ParseStreamAPI]), writes one JSONL [Record] per request as it finishes,
// and returns the condition's [Summary] ([Summarize], with the percentile
// helpers [Percentile], [Median] and [Distribute]). [MeasureToFiles] is
// cmd/sendrequests' library: one condition measured into its records and
// summary files, refused before anything is sent when they could not be
// kept. Before the first
// request, [CheckReachable] tells a server that is down from one that
// answers; [TimeoutDuration], [FileSHA256] and [WriteNewFile] convert a
// timeout, fingerprint the prompt file and write evidence that is never
// overwritten, for the runner and cmd/sendrequests alike.
//
// It stands alone: it imports nothing from the sweep runner, the analysis or
// the reports (package sweep builds on it, as cmd/sendrequests does). Record
// fields and summary keys follow the serving-inference Python tool
// (DanLoran/serving-inference, scripts/send_requests.py), schema 1.0.
package loadgen
