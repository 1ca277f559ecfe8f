// Package cuda runs GPT-2 on an NVIDIA GPU as an engine.Backend without cgo.
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
//   - Backend: the GPT-2 forward pass over a paged KV cache, the same
//     computation as llm/gpt2's CPU backend, which is its reference.
package cuda
