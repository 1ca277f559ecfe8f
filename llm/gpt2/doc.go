// Package gpt2 is GPT-2 for tinyserve: Hugging Face checkpoint loading
// (config.json plus safetensors or PyTorch's pytorch_model.bin, read as
// data with no pickle code run, memory-mapped, float32/float16/bfloat16),
// the built-in random-weight models, and a CPU implementation of the
// engine's Backend with attention read through paged-KV block tables.
//
// Typical use, as tinyserve.Open does it:
//
//	m, err := gpt2.Builtin(gpt2.BuiltinTiny) // or gpt2.Load(dir)
//	...
//	defer m.Close()
//	be, err := gpt2.NewCPUBackend(m, gpt2.CPUOptions{})
//	...
//	defer be.Close()
//	eng, err := engine.New(be, tok, be.Info(), engine.Config{...})
//
// A Model is read-only once built and may back several backends (a CUDA
// backend can read Model.Weights to upload them). A CPUBackend is used from
// the engine's goroutine only, like every Backend.
//
// Numerics follow Hugging Face's GPT2LMHeadModel: pre-LayerNorm blocks,
// Conv1D weights stored in×out (y = x·W + b), c_attn output split q|k|v,
// heads contiguous, scores scaled by 1/sqrt(head_dim), gelu_new (tanh form),
// final ln_f, LM head tied to wte unless tie_word_embeddings is false. Everything
// is computed in float32; the golden tests (testdata/gpt2-tiny*) compare
// with PyTorch float64 references.
//
// NewCPUBackend repacks every weight matrix once into the panel layout of
// internal/f32 (the LM head from wte's transpose), float32 or, with
// CPUOptions.WeightDType "bfloat16", bfloat16, so that a decode step
// streams each weight exactly once through AVX-512 or AVX2+FMA kernels
// (chosen at start-up; portable Go elsewhere). Matmuls split across the
// worker pool by column panels, and by rows for long prefills; attention
// uses the same package's vector kernels.
package gpt2
