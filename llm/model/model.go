// Package model is the architecture-neutral description of a decoder-only
// language model that every backend executes: a Config (shape, norm,
// positions, attention, MLP, head) read from a Hugging Face config.json,
// and Weights by role, read from the checkpoint (llm/checkpoint) in their
// stored type or generated for the built-in models. GPT-2, Llama, Qwen2
// and Qwen3 are ways of filling in a Config and naming tensors (gpt2.go,
// llama.go), not forward passes of their own.
//
// Typical use, as tinyserve.Open does it:
//
//	src, err := model.Resolve(name, model.ResolveOptions{})   // built-in, folder or hub id
//	m, err := model.Open(src, model.OpenOptions{})
//	defer m.Close()
//	be, err := cpu.New(m, cpu.Options{})
//
// A Model is read-only once built and may back several backends.
package model

import (
	"errors"
	"fmt"
	"slices"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/checkpoint"
)

// ErrBadCheckpoint is matched (errors.Is) by every error that Load returns
// because a checkpoint folder's contents are wrong: bad config.json,
// missing or malformed tensors, unreadable weight files. Errors that are
// not about the checkpoint (a missing folder, permission denied) wrap the
// os error instead.
var ErrBadCheckpoint = checkpoint.ErrBad

// Model is a model's configuration and weights. It is read-only once
// built, so one Model may back several backends. Call Close when done with
// a loaded model to unmap its files.
type Model struct {
	// Name is the model's id: the built-in name, a checkpoint folder's
	// base name, or the Hugging Face id it was found under.
	Name string
	// Source says where the model came from: its folder and the files
	// read, the hub id and revision; Dir is empty for a built-in model.
	Source Source
	// Files are the files of Source.Dir that Load read, relative to it and
	// sorted: config.json, generation_config.json when there is one, the
	// weights and their index. Together they determine the model.
	Files []string
	// Config is the model's shape and numerical settings.
	Config Config
	// RandomWeights is true for the built-in models and the dummy load
	// format, whose weights are generated: their text is meaningless.
	RandomWeights bool
	// Defaults are the sampling defaults of the checkpoint's
	// generation_config.json (ReadGenerationConfig); a server uses them
	// for what a request leaves out. Set them to zero to use the API's.
	Defaults llm.SamplingDefaults
	// GenerationEOS are generation_config.json's eos_token_id (a number or
	// a list): ids that end a sequence besides config.json's.
	GenerationEOS []int
	// Weights are the parameters.
	Weights Weights

	release []func() error // unmaps the checkpoint's files
}

// EOSTokenIDs are the ids that end a sequence according to the model's own
// files: config.json's eos_token_id then generation_config.json's, without
// repeats. The tokenizer's eos_token joins them in tinyserve.Open.
func (m *Model) EOSTokenIDs() []int {
	var ids []int
	for _, id := range append(slices.Clone(m.Config.EOSTokenIDs), m.GenerationEOS...) {
		if !slices.Contains(ids, id) && id >= 0 && id < m.Config.VocabSize {
			ids = append(ids, id)
		}
	}
	return ids
}

// Info describes the model for an engine: EOSTokenID is the first of
// EOSTokenIDs (-1 for none) and StopTokenIDs the rest. Backend is left
// empty for the backend to fill in.
func (m *Model) Info() llm.ModelInfo {
	info := llm.ModelInfo{
		ID:            m.Name,
		MaxModelLen:   m.Config.MaxPositions,
		VocabSize:     m.Config.VocabSize,
		EOSTokenID:    -1,
		RandomWeights: m.RandomWeights,
		Defaults:      m.Defaults,
	}
	if ids := m.EOSTokenIDs(); len(ids) > 0 {
		info.EOSTokenID, info.StopTokenIDs = ids[0], ids[1:]
	}
	if m.Source.Dir != "" {
		info.Source = &llm.ModelSource{Dir: m.Source.Dir, HubID: m.Source.HubID, Revision: m.Source.Revision, Files: slices.Clone(m.Files)}
	}
	return info
}

// NumParams is the number of distinct parameters (a tied LM head counts
// once).
func (m *Model) NumParams() int64 {
	w := NewWeights(&m.Config)
	var n int64
	for _, p := range params(&m.Config, &w) {
		n += numel(p.shape)
	}
	return n
}

// WeightBytes is the memory of the parameters in their stored type (a tied
// LM head counts once).
func (m *Model) WeightBytes() int64 {
	var n int64
	for _, p := range params(&m.Config, &m.Weights) {
		n += p.dst.Bytes()
	}
	return n
}

func numel(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

// Close releases the memory mappings of a loaded checkpoint. The model's
// weights must not be used afterwards. Closing a built-in model, or closing
// twice, does nothing.
func (m *Model) Close() error {
	var errs []error
	for _, r := range m.release {
		errs = append(errs, r())
	}
	m.release = nil
	return errors.Join(errs...)
}

// Check verifies that every tensor the config needs is there with its
// shape, so that a hand-built Model fails when a backend is made from it
// rather than deep in a forward pass.
func (m *Model) Check() error {
	if err := m.Config.Validate(); err != nil {
		return fmt.Errorf("model %q: %w", m.Name, err)
	}
	if err := sameForm(&m.Config, &m.Weights); err != nil {
		return fmt.Errorf("model %q: %w", m.Name, err)
	}
	for _, p := range params(&m.Config, &m.Weights) {
		if got, want := int64(p.dst.Len()), numel(p.shape); got != want || p.dst.IsZero() {
			return fmt.Errorf("model %q: tensor %q has %d values, shape %v needs %d", m.Name, p.name, got, p.shape, want)
		}
	}
	if m.Config.TiedEmbeddings && !m.Weights.TiedHead() {
		return fmt.Errorf("model %q: the config ties the LM head to the embedding, the weights do not", m.Name)
	}
	if !m.Config.TiedEmbeddings && m.Weights.LMHead.Len() != m.Weights.Embed.Len() {
		return fmt.Errorf("model %q: LM head of %d values, embedding of %d", m.Name, m.Weights.LMHead.Len(), m.Weights.Embed.Len())
	}
	return nil
}

// TrimVocab makes the model use only its first n token ids, dropping the
// rest of the embedding and of the LM head (views, no copy). A checkpoint
// trained with its vocabulary padded past the tokenizer's (nanoGPT pads
// GPT-2's 50257 to 50304; Qwen2.5's 151936 rows hold 151665 tokens) has
// rows for ids no tokenizer can produce or decode; with them gone the model
// never samples one. Call it before a backend is made from the model.
func (m *Model) TrimVocab(n int) error {
	if n < 1 || n > m.Config.VocabSize {
		return fmt.Errorf("model: cannot trim a vocabulary of %d ids to %d", m.Config.VocabSize, n)
	}
	if ids := append(m.EOSTokenIDs(), m.Config.BOSTokenID); slices.Max(ids) >= n {
		return fmt.Errorf("model: the bos/eos token ids %v reach past the first %d ids, which the tokenizer has", ids, n)
	}
	tied := m.Weights.TiedHead()
	m.Weights.Embed = m.Weights.Embed.Slice(int64(n))
	if tied {
		m.Weights.LMHead = m.Weights.Embed
	} else {
		m.Weights.LMHead = m.Weights.LMHead.Slice(int64(n))
	}
	m.Config.VocabSize = n
	return nil
}
