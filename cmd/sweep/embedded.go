package main

// The embedded target: the one place where cmd/sweep knows tinyserve's
// engine. The sweep package only speaks HTTP, so an in-process engine is
// served on a free loopback port exactly as cmd/serve would serve it, and the
// sweep is handed its URL; what is measured is therefore the same HTTP path
// a remote client sees.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/tinyserve/tinyserve"
	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/openai"
	"github.com/tinyserve/tinyserve/sweep"
	"github.com/tinyserve/tinyserve/sweep/analysis"
	"github.com/tinyserve/tinyserve/sweep/loadgen"
)

// embeddedDrainTimeout bounds how long the embedded target lets requests
// still running finish once the sweep is done with it.
const embeddedDrainTimeout = 30 * time.Second

// embeddedServer is a running in-process tinyserve.
type embeddedServer struct {
	URL   string // the completions or chat endpoint (target.api)
	Model string // the served model's name
	// Checkpoint is the model's files by content; nil for a model made in
	// memory.
	Checkpoint *analysis.Checkpoint
	stop       func(context.Context) error
}

// startEmbedded opens the engine described by target.engine (the keys of
// tinyserve.Config: model, backend, dtype, max_num_seqs,
// max_num_batched_tokens, block_size, num_blocks, ...) and serves it with
// openai.NewHandler on 127.0.0.1 at a free port.
func startEmbedded(ctx context.Context, target *sweep.Target, logger *slog.Logger) (*embeddedServer, error) {
	cfg, err := tinyserve.DecodeConfigJSON(target.Engine)
	if err != nil {
		return nil, fmt.Errorf("target.engine: %w", err)
	}
	cfg.Logger = logger
	eng, err := tinyserve.Open(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("target.engine: %w%s", err, noGPUHint(err))
	}
	ck, err := checkpointOf(eng.Info().Source)
	if err != nil {
		eng.Close()
		return nil, fmt.Errorf("target.engine: recording the model's files: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		eng.Close()
		return nil, err
	}
	srv := &http.Server{
		Handler:           openai.NewHandler(eng, openai.WithLogger(logger)),
		ReadHeaderTimeout: 10 * time.Second,
		// No idle timeout: the sweep's client is this server's only one,
		// and keeps its connections for the whole sweep, so that a level
		// measured after a long run finds them open.
	}
	// The sweep's own context does not stop the server: stop does, after
	// the sweep, with the drain and shutdown cmd/serve uses.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	served := make(chan error, 1)
	go func() {
		served <- openai.Serve(sctx, srv, ln, eng, openai.ServeOptions{DrainTimeout: embeddedDrainTimeout, Logger: logger})
	}()
	stop := func(ctx context.Context) error {
		cancel()
		select {
		case err := <-served:
			return errors.Join(err, eng.Close())
		case <-ctx.Done():
			// Closing the engine ends the requests still running, and
			// with them the drain.
			return errors.Join(ctx.Err(), eng.Close(), <-served)
		}
	}
	return &embeddedServer{
		URL:        "http://" + ln.Addr().String() + endpointPath(target.API),
		Model:      eng.Info().ID,
		Checkpoint: ck,
		stop:       stop,
	}, nil
}

// checkpointOf hashes the files the engine loaded its model from, for the
// manifest; nil for a model made in memory. The hashes are taken after the
// load, from the same paths: at GPT-2's sizes (0.5 GB for 124M in float32)
// this costs well under a second. The tokenizer's files outside the model's
// folder are named "tokenizer/..." (see sweep.NewCheckpoint), so that the
// same files in a moved folder or hub cache compare equal on resume; their
// folder is recorded beside them, with its hub id and commit when it is a
// hub cache's snapshot (--tokenizer ORG/NAME, --tokenizer-revision).
func checkpointOf(src *llm.ModelSource) (*analysis.Checkpoint, error) {
	if src == nil {
		return nil, nil
	}
	dir, err := filepath.Abs(src.Dir)
	if err != nil {
		return nil, err
	}
	ck, err := sweep.NewCheckpoint(dir, src.Files, src.TokenizerFiles)
	if err != nil {
		return nil, err
	}
	ck.HubID, ck.Revision = src.HubID, src.Revision
	return ck, nil
}

// noGPUHint is what to add to an engine's start-up error when the cuda
// backend found no driver or no device: the committed scenario configs name
// cuda, and the way to run one on a machine without a GPU is an --engine
// override, which the error would otherwise leave the user to find in the
// docs.
func noGPUHint(err error) string {
	if tinyserve.NoGPU(err) {
		return "\nno usable GPU here: --engine backend=cpu runs the same sweep on the CPU"
	}
	return ""
}

// endpointPath is the embedded server's path for the sweep's API.
func endpointPath(api loadgen.API) string {
	if api == loadgen.APIChat {
		return "/v1/chat/completions"
	}
	return "/v1/completions"
}
