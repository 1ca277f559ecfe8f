// Package llm is the vocabulary every tinyserve package shares: the request a
// caller submits ([Request], [SamplingParams]), what a running request yields
// ([Event]), the [Engine] interface the OpenAI server serves, the [Tokenizer]
// interface, and typed errors.
//
// The package holds no behaviour beyond validation, so that the engine, the
// backends, the server and the benchmark client can all depend on it without
// depending on each other.
package llm
