package engine

import "github.com/tinyserve/tinyserve/llm/kv"

// Backend runs the model: one forward pass over a flattened batch per step.
//
// The engine owns batching, sampling and concurrency. A backend is called
// from the engine's goroutine only and needs no locks; it never allocates KV
// blocks or chooses tokens. Optional extras are separate interfaces the
// engine finds by type assertion (io.Closer).
//
// Follows vLLM's model runner (vllm/v1/worker/gpu/model_runner.py): block ids
// come from the scheduler's output, and per-sequence state is dropped when a
// batch says a sequence finished or was preempted.
type Backend interface {
	// MaxKVBlocks reports how many KV blocks of blockSize tokens the backend
	// can hold within its memory budget. Called once, before the KV manager
	// is built; the engine uses the smaller of this and the configured
	// num_blocks.
	MaxKVBlocks(blockSize int) (int, error)
	// AllocateKV preallocates physical KV storage for exactly numBlocks
	// blocks of blockSize tokens, indexed by the kv package's block ids.
	// Called once, before the first Forward.
	AllocateKV(numBlocks, blockSize int) error
	// Forward runs one step. The batch is valid only during the call.
	// With prefix caching, a sequence's BlockTable may start with blocks
	// whose K and V an earlier sequence of the same batch writes in this
	// step: a backend must write every sequence's K and V of a layer
	// before that layer's attention reads the cache (as a layer-by-layer
	// forward over the whole batch does), or else run the sequences in
	// batch order. It
	// returns, in batch order, one row per sequence with Sample set, or
	// for a sequence with PromptLogits set one row per token of Tokens
	// (the last of them is its sampled row when Sample is set); the rows
	// and their logits belong to the backend until the next call, and the
	// engine only reads them (a backend may return the same logits slice
	// again, say from a table). A row count that does not match, an Argmax
	// or a logits length outside the vocabulary fails the step like an
	// error does.
	Forward(batch *Batch) ([]SampleRow, error)
}

// Batch is one step's work: for each scheduled sequence, the tokens to run,
// where they go, and whether to sample after them.
type Batch struct {
	// Seqs are the scheduled sequences in batch order.
	Seqs []SeqBatch
	// Dropped are sequences that finished, were aborted or were preempted
	// since the previous step: a backend forgets any state it keeps for them.
	// Their blocks may already belong to other sequences.
	Dropped []kv.SeqID
	// NumTokens is the total of len(Seqs[i].Tokens).
	NumTokens int
}

// SeqBatch is one sequence's part of a batch.
type SeqBatch struct {
	// ID is the sequence's id; a re-prefill after preemption keeps it.
	ID kv.SeqID
	// Tokens are the token ids to run this step, at positions StartPos,
	// StartPos+1, ... Their K and V are written into the cache.
	Tokens []int
	// StartPos is the position of Tokens[0]: the number of tokens of this
	// sequence already in the KV cache.
	StartPos int
	// BlockTable holds the block ids of the sequence's KV, covering at least
	// StartPos+len(Tokens) positions: position p is in block
	// BlockTable[p/blockSize] at offset p%blockSize.
	BlockTable []int32
	// Sample is true when the engine samples a token after the last of
	// Tokens (the step reaches the end of the sequence's known tokens).
	Sample bool
	// NeedLogits is true when the engine needs the full logits row of the
	// sampled position (sampling with temperature, logprobs, masking); false
	// means the argmax alone suffices (greedy), so a GPU backend may return
	// only the token id.
	NeedLogits bool
	// PromptLogits is true when the engine needs the logits of every
	// position of Tokens (prompt log-probabilities): Forward then returns
	// one row per token, each with Logits set. Only set for a backend that
	// implements PromptLogitsBackend.
	PromptLogits bool
}

// PromptLogitsBackend is a Backend whose Forward honours
// SeqBatch.PromptLogits. The engine accepts requests that ask for
// SamplingParams.PromptLogprobs only when its backend implements it and
// ReturnsPromptLogits reports true (a wrapper can say false).
type PromptLogitsBackend interface {
	Backend
	// ReturnsPromptLogits reports whether Forward returns a row per token
	// for sequences with PromptLogits set.
	ReturnsPromptLogits() bool
}

// SampleRow is a backend's result for one sampled sequence, or for one
// position of a sequence with PromptLogits.
type SampleRow struct {
	// Logits over the vocabulary, set when the sequence's NeedLogits or
	// PromptLogits was true (a backend may also set it otherwise).
	Logits []float32
	// Argmax is the id of the largest logit (ties to the lowest id); set when
	// NeedLogits was false, -1 when the backend did not compute it.
	Argmax int
}
