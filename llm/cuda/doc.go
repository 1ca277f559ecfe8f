// Package cuda runs decoder-only models (every architecture model.Config
// describes: GPT-2, Llama, Qwen2, Qwen3) on an NVIDIA GPU as an
// engine.Backend without cgo.
//
// The CUDA driver (libcuda.so.1), cuBLAS and NVRTC are opened at run time
// with github.com/ebitengine/purego, so the package builds with
// CGO_ENABLED=0 on machines without the CUDA toolkit and its unit tests run
// anywhere; the GPU is used only when NewBackend finds a driver and a device.
//
// The layers are:
//
//   - library discovery (Locate, SearchDirs): which file provides each
//     library, with an error naming every place searched when one is missing;
//   - typed bindings (Driver, CuBLAS, NVRTC): one Go method per C call, every
//     status turned into an *Error carrying CUDA's own name and message;
//   - kernels (kernels/*.cu, embedded) compiled once per source and GPU
//     architecture by NVRTC and cached on disk;
//   - Backend: one forward pass over a paged KV cache for every
//     architecture, driven by the model.Config, the same computation as
//     llm/cpu's backend, which is its reference.
package cuda
