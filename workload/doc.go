// Package workload turns experiment files (experiments/<name>.json) into
// deterministic prompt files (prompts/<name>.jsonl) with a metadata sidecar
// that records the config and the SHA-256 of the prompt file, and verifies
// them later.
//
// Generation is byte-compatible with serving-inference's generate_prompts.py:
// for the same config and tokenizer both write the same bytes, so workloads
// can move between the Python tool and tinyserve and anyone can check them.
// The package is pure apart from reading and writing those files; the
// tokenizer is passed in (see llm/tokenizer.Load). [Batch], the library of
// cmd/genprompts, is the one place that finds tokenizers itself, because it
// shares them between the workloads of one invocation.
package workload
