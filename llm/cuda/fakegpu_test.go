package cuda

// A fake GPU for testing the backend's orchestration without one: the
// Driver's and CuBLAS's C functions are replaced by Go functions over a
// bounds-checked fake device memory, and each kernel of kernels/decoder.cu is
// emulated in Go from its documented semantics, reading its parameters
// from cuLaunchKernel's argument array in the .cu file's order. This checks
// what a GPU run would otherwise be the first to check: kernel argument
// order and types, buffer offsets and sizes, the cuBLAS transposes and
// leading dimensions, the metadata layout, the results copy and their
// mapping back to batch order, and CUDA graph capture and replay. It cannot
// check the CUDA C itself (NVRTC compiles it in nvrtc_test.go; only a GPU
// runs it).

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"
	"unsafe"

	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/kv"
	"github.com/tinyserve/tinyserve/llm/model"
)

type fakeAlloc struct {
	base    DevicePtr
	data    []byte
	mapping []byte // the mmap holding data, for the host emulator's real addresses
}

// fakeGPU is the device: memory, kernels by name, and the graph being
// captured.
type fakeGPU struct {
	t       testing.TB
	allocs  []*fakeAlloc // sorted by base
	last    *fakeAlloc   // the allocation of the previous access (a cache)
	next    DevicePtr
	host    map[unsafe.Pointer][]byte
	kernels []string
	// capturing collects the work queued while a stream is being captured;
	// graphs holds captured work by GraphExec id.
	capturing *[]func()
	graphs    map[GraphExec][]func()
	graphIDs  GraphExec // the last id given to a graph
	launches  int
	// byName counts the launches of each kernel (queued, or captured).
	byName map[string]int
	free   uint64
	// emu, when set, runs the kernels' CUDA C and the GEMMs on the host
	// (emu_test.go) instead of the Go emulations below; device memory is
	// then real memory, each allocation ending at a guard page. reverse
	// runs each block's threads, and the blocks, in reverse order.
	emu     *cudaEmu
	reverse bool
	// workspace is the buffer given to cublasSetWorkspace.
	workspace DevicePtr
	// cc is the compute capability the device reports (major, minor).
	cc [2]int32
	// events are the recorded times of the events, by Event-1.
	events []time.Time
}

func newFakeGPU(t testing.TB) *fakeGPU {
	return &fakeGPU{t: t, next: 1 << 32, host: map[unsafe.Pointer][]byte{}, graphs: map[GraphExec][]func(){}, free: 8 << 30, cc: [2]int32{9, 0}}
}

func (g *fakeGPU) alloc(n int) DevicePtr {
	if g.emu != nil {
		return g.allocMapped(n)
	}
	a := &fakeAlloc{base: g.next, data: make([]byte, n)}
	g.allocs = append(g.allocs, a)
	g.next += DevicePtr(align(n, 256) + 256)
	return a.base
}

func (g *fakeGPU) freePtr(p DevicePtr) int32 {
	for i, a := range g.allocs {
		if a.base == p {
			g.unmap(a)
			g.allocs = slices.Delete(g.allocs, i, i+1)
			g.last = nil
			return 0
		}
	}
	g.t.Errorf("cuMemFree of %#x, which is not an allocation", p)
	return 1
}

// bytes returns n bytes of device memory at p, failing the test on an
// out-of-bounds access (which a real GPU would not report).
func (g *fakeGPU) bytes(p DevicePtr, n int) []byte {
	a := g.last
	if a == nil || p < a.base || p >= a.base+DevicePtr(len(a.data)) {
		i := sort.Search(len(g.allocs), func(i int) bool { return g.allocs[i].base > p }) - 1
		if i < 0 {
			panic(fmt.Sprintf("device access at %#x outside every allocation", p))
		}
		a = g.allocs[i]
		g.last = a
	}
	off := int(p - a.base)
	if off+n > len(a.data) {
		panic(fmt.Sprintf("device access [%#x, +%d) overruns an allocation of %d bytes at %#x", p, n, len(a.data), a.base))
	}
	return a.data[off : off+n]
}

func (g *fakeGPU) f32(p DevicePtr, i int) float32 {
	return math.Float32frombits(le32(g.bytes(p+DevicePtr(4*i), 4)))
}
func (g *fakeGPU) setF32(p DevicePtr, i int, v float32) {
	put32(g.bytes(p+DevicePtr(4*i), 4), math.Float32bits(v))
}
func (g *fakeGPU) i32(p DevicePtr, i int) int { return int(int32(le32(g.bytes(p+DevicePtr(4*i), 4)))) }
func (g *fakeGPU) setI32(p DevicePtr, i, v int) {
	put32(g.bytes(p+DevicePtr(4*i), 4), uint32(int32(v)))
}

// elem reads element i of an array of cudaDataType dt.
func (g *fakeGPU) elem(p DevicePtr, i, dt int) float32 {
	switch dt {
	case DataFloat32:
		return g.f32(p, i)
	case DataFloat16:
		b := g.bytes(p+DevicePtr(2*i), 2)
		return f16ToF32(uint16(b[0]) | uint16(b[1])<<8)
	case DataBFloat16:
		b := g.bytes(p+DevicePtr(2*i), 2)
		return math.Float32frombits(uint32(uint16(b[0])|uint16(b[1])<<8) << 16)
	}
	panic(fmt.Sprintf("data type %d", dt))
}

func (g *fakeGPU) setElem(p DevicePtr, i, dt int, v float32) {
	switch dt {
	case DataFloat32:
		g.setF32(p, i, v)
	case DataFloat16, DataBFloat16:
		h := f32ToF16(v)
		if dt == DataBFloat16 {
			h = f32ToBF16(v)
		}
		b := g.bytes(p+DevicePtr(2*i), 2)
		b[0], b[1] = byte(h), byte(h>>8)
	default:
		panic(fmt.Sprintf("data type %d", dt))
	}
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
func put32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

// hostBytes is the Go memory behind a host pointer: pinned memory from
// MemAllocHost, or Go memory the backend passed directly.
func (g *fakeGPU) hostBytes(p unsafe.Pointer, n int) []byte { return unsafe.Slice((*byte)(p), n) }

// queue runs f now, or records it when the stream is being captured.
func (g *fakeGPU) queue(f func()) {
	if g.capturing != nil {
		*g.capturing = append(*g.capturing, f)
		return
	}
	f()
}

// driver returns a Driver whose calls act on g.
func (g *fakeGPU) driver() *Driver {
	return &Driver{
		Path:             "fake",
		getErrorName:     func(int32, **byte) int32 { return 1 },
		getErrorString:   func(int32, **byte) int32 { return 1 },
		init:             func(uint32) int32 { return 0 },
		driverGetVersion: func(v *int32) int32 { *v = 12040; return 0 },
		deviceGetCount:   func(n *int32) int32 { *n = 1; return 0 },
		deviceGet:        func(d *int32, o int32) int32 { *d = o; return 0 },
		deviceGetAttr: func(v *int32, attr, dev int32) int32 {
			switch attr {
			case AttrComputeCapabilityMajor:
				*v = g.cc[0]
			case AttrComputeCapabilityMinor:
				*v = g.cc[1]
			default:
				*v = 1
			}
			return 0
		},
		deviceGetName: func(name *byte, n, dev int32) int32 {
			copy(unsafe.Slice(name, n), "Fake GPU\x00")
			return 0
		},
		primaryCtxRetain:  func(c *Context, dev int32) int32 { *c = 1; return 0 },
		primaryCtxRelease: func(int32) int32 { return 0 },
		ctxSetCurrent:     func(Context) int32 { return 0 },
		memAlloc:          func(p *DevicePtr, n uint64) int32 { *p = g.alloc(int(n)); return 0 },
		memFree:           func(p DevicePtr) int32 { return g.freePtr(p) },
		memGetInfo:        func(free, total *uint64) int32 { *free, *total = g.free, 16<<30; return 0 },
		memAllocHost: func(p *unsafe.Pointer, n uint64) int32 {
			b := make([]byte, n)
			if g.emu != nil { // poisoned, as the device memory (allocMapped)
				for i := range b {
					b[i] = 0xff
				}
			}
			*p = unsafe.Pointer(&b[0])
			g.host[*p] = b
			return 0
		},
		memFreeHost: func(p unsafe.Pointer) int32 { delete(g.host, p); return 0 },
		memcpyHtoD: func(dst DevicePtr, src unsafe.Pointer, n uint64, s Stream) int32 {
			if g.capturing != nil {
				g.t.Error("a copy was queued during graph capture")
			}
			copy(g.bytes(dst, int(n)), g.hostBytes(src, int(n)))
			return 0
		},
		memcpyDtoH: func(dst unsafe.Pointer, src DevicePtr, n uint64, s Stream) int32 {
			if g.capturing != nil {
				g.t.Error("a copy was queued during graph capture")
			}
			copy(g.hostBytes(dst, int(n)), g.bytes(src, int(n)))
			return 0
		},
		streamCreate:  func(s *Stream, flags uint32) int32 { *s = 7; return 0 },
		streamDestroy: func(Stream) int32 { return 0 },
		streamSync:    func(Stream) int32 { return 0 },
		moduleLoadData: func(m *Module, image unsafe.Pointer) int32 {
			*m = 1
			return 0
		},
		moduleGetFunction: func(f *Function, m Module, name string) int32 {
			if g.emu != nil && g.emu.kernelArgs(name) < 0 {
				return 500 // CUDA_ERROR_NOT_FOUND
			}
			g.kernels = append(g.kernels, name)
			*f = Function(len(g.kernels))
			return 0
		},
		moduleUnload: func(Module) int32 { return 0 },
		launchKernel: func(f Function, gx, gy, gz, bx, by, bz, shared uint32, s Stream, params, extra unsafe.Pointer) int32 {
			g.launch(g.kernels[f-1], [3]uint32{gx, gy, gz}, [3]uint32{bx, by, bz}, shared, params)
			return 0
		},
		streamBeginCapture: func(s Stream, mode int32) int32 {
			g.capturing = &[]func(){}
			return 0
		},
		streamEndCapture: func(s Stream, gr *Graph) int32 {
			g.graphIDs++ // never reused: a destroyed graph's id must stay dead
			id := g.graphIDs
			g.graphs[id] = *g.capturing
			g.capturing = nil
			*gr = Graph(id)
			return 0
		},
		graphInstantiate: func(e *GraphExec, gr Graph, flags uint64) int32 { *e = GraphExec(gr); return 0 },
		graphLaunch: func(e GraphExec, s Stream) int32 {
			for _, f := range g.graphs[e] {
				f()
			}
			return 0
		},
		graphExecDestroy: func(e GraphExec) int32 { delete(g.graphs, e); return 0 },
		// Events stamp the host's clock when recorded: the fake GPU runs
		// each launch when it is queued.
		eventCreate: func(e *Event, flags uint32) int32 {
			g.events = append(g.events, time.Time{})
			*e = Event(len(g.events))
			return 0
		},
		eventRecord:  func(e Event, s Stream) int32 { g.events[e-1] = time.Now(); return 0 },
		eventSync:    func(Event) int32 { return 0 },
		eventDestroy: func(Event) int32 { return 0 },
		eventElapsed: func(ms *float32, a, b Event) int32 {
			*ms = float32(g.events[b-1].Sub(g.events[a-1]).Seconds() * 1e3)
			return 0
		},
		eventElapsedName: "cuEventElapsedTime",
		graphDestroy:     func(Graph) int32 { return 0 },
	}
}

// args decodes cuLaunchKernel's parameter array: slot i as a pointer,
// an int or a float.
type args struct{ p []unsafe.Pointer }

func (a args) ptr(i int) DevicePtr { return DevicePtr(*(*uint64)(a.p[i])) }
func (a args) int(i int) int       { return int(*(*int32)(a.p[i])) }
func (a args) flt(i int) float32   { return *(*float32)(a.p[i]) }
func storage(name string) (int, string) {
	for _, s := range []struct {
		sfx string
		dt  int
	}{{"_bf16", DataBFloat16}, {"_f16", DataFloat16}, {"_f32", DataFloat32}} {
		if n := len(name) - len(s.sfx); n > 0 && name[n:] == s.sfx {
			return s.dt, name[:n]
		}
	}
	return DataFloat32, name
}

// launch emulates one kernel. Parameter values are decoded now (as
// cuLaunchKernel copies them), the work runs now or at graph replay.
func (g *fakeGPU) launch(name string, grid, block [3]uint32, shared uint32, params unsafe.Pointer) {
	g.launches++
	if g.byName == nil {
		g.byName = map[string]int{}
	}
	g.byName[name]++
	nargs := map[string]int{"embed": 6, "norm": 8, "add_norm": 9, "qkv_store": 17, "attention": 14, "attention_split": 17, "attention_combine": 6, "flash_prefill": 15, "bias_act": 6, "silu_mul": 5, "residual": 5, "argmax_rows": 3, "hold_ns": 1,
		"embed_q8": 7, "q8_gemv1": 7, "q8_gemv2": 7, "q8_gemv4": 7, "q8_gemv8": 7, "q8_dequant": 4}
	dt, base := storage(name)
	n, ok := nargs[base]
	if g.emu != nil {
		n, ok = int(g.emu.kernelArgs(name)), true
	}
	if !ok {
		panic("unknown kernel " + name)
	}
	raw := unsafe.Slice((*unsafe.Pointer)(params), n)
	// Copy the values: the backend reuses its argument array.
	vals := make([]uint64, n)
	for i := range n {
		vals[i] = *(*uint64)(raw[i])
	}
	cp := make([]unsafe.Pointer, n)
	for i := range n {
		cp[i] = unsafe.Pointer(&vals[i])
	}
	a := args{cp}
	if (block[0]%32 != 0 && name != "hold_ns") || block[0] > 1024 || block[1] != 1 || block[2] != 1 {
		panic(fmt.Sprintf("%s: block %v", name, block))
	}
	if g.emu != nil {
		g.queue(func() {
			if err := g.emu.launch(name, grid, block, shared, vals, g.reverse); err != nil {
				g.t.Error(err)
			}
		})
		return
	}
	g.queue(func() { g.run(base, dt, grid, block, shared, a) })
}

func (g *fakeGPU) run(k string, dt int, grid, block [3]uint32, shared uint32, a args) {
	switch k {
	case "embed": // (float* x, const T* wte, const T* wpe, const int* tokens, const int* pos, int C)
		x, wte, wpe, tok, pos, C := a.ptr(0), a.ptr(1), a.ptr(2), a.ptr(3), a.ptr(4), a.int(5)
		for i := range int(grid[0]) {
			t, p := g.i32(tok, i), g.i32(pos, i)
			for c := range C {
				v := g.elem(wte, t*C+c, dt)
				if wpe != 0 {
					v += g.elem(wpe, p*C+c, dt)
				}
				g.setF32(x, i*C+c, v)
			}
		}
	case "norm": // (T* out, const float* x, const int* rows, const T* w, const T* b, int C, float eps, int rms)
		out, x, rows, w, bias, C, eps, rms := a.ptr(0), a.ptr(1), a.ptr(2), a.ptr(3), a.ptr(4), a.int(5), a.flt(6), a.int(7)
		for r := range int(grid[0]) {
			src := r
			if rows != 0 {
				src = g.i32(rows, r)
			}
			g.normRow(out, r, x, src, w, bias, C, eps, rms != 0, dt)
		}
	case "add_norm": // (T* out, float* x, const float* in, const T* bias, const T* w, const T* b, int C, float eps, int rms)
		out, x, in, bias, w, lb, C, eps, rms := a.ptr(0), a.ptr(1), a.ptr(2), a.ptr(3), a.ptr(4), a.ptr(5), a.int(6), a.flt(7), a.int(8)
		for r := range int(grid[0]) {
			for c := range C {
				g.setF32(x, r*C+c, g.f32(x, r*C+c)+(g.f32(in, r*C+c)+g.opt(bias, c, dt)))
			}
			g.normRow(out, r, x, r, w, lb, C, eps, rms != 0, dt)
		}
	case "qkv_store": // (float* q, const float* qkv, const T* bias, const T* qNorm, const T* kNorm, const double* invFreq, T* kc, T* vc, pos, seq, bt, int maxBlocks, int bs, int H, int KVH, int D, float eps)
		q, qkv, bias, qNorm, kNorm, invFreq, kc, vc := a.ptr(0), a.ptr(1), a.ptr(2), a.ptr(3), a.ptr(4), a.ptr(5), a.ptr(6), a.ptr(7)
		pos, seq, bt := a.ptr(8), a.ptr(9), a.ptr(10)
		maxBlocks, bs, H, KVH, D, eps := a.int(11), a.int(12), a.int(13), a.int(14), a.int(15), a.flt(16)
		if block[0]%32 != 0 || D > 1024 {
			panic(fmt.Sprintf("qkv_store: block %d for D=%d", block[0], D))
		}
		QD, KVD := H*D, KVH*D
		W := QD + 2*KVD
		head := make([]float32, D)
		for i := range int(grid[0]) {
			if g.i32(seq, i) < 0 {
				continue // a padding row of a graph step
			}
			p := g.i32(pos, i)
			slot := g.i32(bt, g.i32(seq, i)*maxBlocks+p/bs)*bs + p%bs
			for hh := range H + KVH {
				for d := range D {
					head[d] = g.f32(qkv, i*W+hh*D+d) + g.opt(bias, hh*D+d, dt)
				}
				gain := qNorm
				if hh >= H {
					gain = kNorm
				}
				if gain != 0 {
					var ss float64
					for _, v := range head {
						ss += float64(v) * float64(v)
					}
					inv := float32(1 / math.Sqrt(ss/float64(D)+float64(eps)))
					for d := range head {
						head[d] = head[d] * inv * g.elem(gain, d, dt)
					}
				}
				if invFreq != 0 {
					half := D / 2
					for j := range half {
						sn, cs := math.Sincos(float64(p) * g.f64(invFreq, j))
						c, s := float32(cs), float32(sn)
						x1, x2 := head[j], head[j+half]
						head[j], head[j+half] = x1*c-x2*s, x2*c+x1*s
					}
				}
				for d, v := range head {
					if hh < H {
						g.setF32(q, i*QD+hh*D+d, v)
					} else {
						g.setElem(kc, slot*KVD+(hh-H)*D+d, dt, v)
					}
				}
			}
			for c := range KVD {
				g.setElem(vc, slot*KVD+c, dt, g.f32(qkv, i*W+QD+KVD+c)+g.opt(bias, QD+KVD+c, dt))
			}
		}
	case "attention": // (T* out, const float* q, kc, vc, pos, seq, bt, int maxBlocks, int bs, int QD, int KVD, int D, int group, float scale)
		out, q, kc, vc, pos, seq, bt := a.ptr(0), a.ptr(1), a.ptr(2), a.ptr(3), a.ptr(4), a.ptr(5), a.ptr(6)
		maxBlocks, bs, QD, KVD, D, group, scale := a.int(7), a.int(8), a.int(9), a.int(10), a.int(11), a.int(12), a.flt(13)
		// The kernel's shared memory: one tile (a position per thread) of
		// weights and slots, the query, and the partial outputs (a pack of
		// W elements per thread where head rows are whole 16-byte packs).
		W := 16 / 2
		if dt == DataFloat32 {
			W = 16 / 4
		}
		if D%W != 0 {
			W = 1
		}
		T := int(block[0])
		if T%32 != 0 || T < D || int(shared) < (2*T+D+T*W)*4 || int(grid[1])*D != QD || group < 1 || int(grid[1])%group != 0 || int(grid[1])/group*D != KVD {
			panic(fmt.Sprintf("attention: block %d, shared %d, grid %v for D=%d QD=%d KVD=%d group=%d", block[0], shared, grid, D, QD, KVD, group))
		}
		for i := range int(grid[0]) {
			p, s := g.i32(pos, i), g.i32(seq, i)
			if s < 0 {
				continue // a padding row of a graph step
			}
			for h := range int(grid[1]) {
				g.attendRow(out, q, kc, vc, bt, i, h, s, 0, p+1, maxBlocks, bs, QD, KVD, D, group, scale, dt, nil)
			}
		}
	case "attention_split": // (T* out, float* part, const float* q, kc, vc, pos, seq, bt, rows, int maxBlocks, int bs, int QD, int KVD, int D, int group, float scale, int splitLen)
		out, part, q, kc, vc, pos, seq, bt, rows := a.ptr(0), a.ptr(1), a.ptr(2), a.ptr(3), a.ptr(4), a.ptr(5), a.ptr(6), a.ptr(7), a.ptr(8)
		maxBlocks, bs, QD, KVD, D, group, scale, splitLen := a.int(9), a.int(10), a.int(11), a.int(12), a.int(13), a.int(14), a.flt(15), a.int(16)
		T, splits := int(block[0]), int(grid[2])
		elem := 2
		if dt == DataFloat32 {
			elem = 4
		}
		if T%32 != 0 || T < D || int(shared) < attentionShared(D, elem) || int(grid[1])*D != QD || int(grid[1])/group*D != KVD || splitLen%T != 0 ||
			(splits > 1 && (part == 0 || int(grid[0])*int(grid[1])*splits*(D+2)*4 > splitPartBytes(D))) {
			panic(fmt.Sprintf("attention_split: block %d, shared %d, grid %v for D=%d QD=%d KVD=%d group=%d splitLen=%d", block[0], shared, grid, D, QD, KVD, group, splitLen))
		}
		acc := make([]float32, D+2)
		for r := range int(grid[0]) {
			i := r
			if rows != 0 {
				i = g.i32(rows, r)
			}
			if i < 0 || g.i32(seq, i) < 0 {
				continue
			}
			p := g.i32(pos, i)
			for h := range int(grid[1]) {
				for z := range splits {
					lo, hi := z*splitLen, min(p+1, (z+1)*splitLen)
					if splits == 1 {
						g.attendRow(out, q, kc, vc, bt, i, h, g.i32(seq, i), lo, hi, maxBlocks, bs, QD, KVD, D, group, scale, dt, nil)
						continue
					}
					base := ((r*int(grid[1])+h)*splits + z) * (D + 2)
					if lo >= hi {
						clear(acc)
						acc[D] = float32(math.Inf(-1))
					} else {
						g.attendRow(out, q, kc, vc, bt, i, h, g.i32(seq, i), lo, hi, maxBlocks, bs, QD, KVD, D, group, scale, dt, acc)
					}
					for d, v := range acc {
						g.setF32(part, base+d, v)
					}
				}
			}
		}
	case "attention_combine": // (T* out, const float* part, const int* rows, int QD, int D, int splits)
		out, part, rows, QD, D, splits := a.ptr(0), a.ptr(1), a.ptr(2), a.int(3), a.int(4), a.int(5)
		if int(grid[1])*D != QD || splits < 2 {
			panic(fmt.Sprintf("attention_combine: grid %v for D=%d QD=%d splits=%d", grid, D, QD, splits))
		}
		for r := range int(grid[0]) {
			i := r
			if rows != 0 {
				i = g.i32(rows, r)
			}
			if i < 0 {
				continue
			}
			for h := range int(grid[1]) {
				base := (r*int(grid[1]) + h) * splits * (D + 2)
				M := float32(math.Inf(-1))
				for z := range splits {
					M = max(M, g.f32(part, base+z*(D+2)+D))
				}
				for d := range D {
					var num, den float32
					for z := range splits {
						pz := base + z*(D+2)
						w := float32(math.Exp(float64(g.f32(part, pz+D) - M)))
						num += w * g.f32(part, pz+d)
						den += w * g.f32(part, pz+D+1)
					}
					g.setElem(out, i*QD+h*D+d, dt, num/den)
				}
			}
		}
	case "flash_prefill": // (T* out, const float* q, kc, vc, pos, seq, bt, tiles, int maxBlocks, int bs, int QD, int KVD, int D, int group, float scale)
		out, q, kc, vc, pos, seq, bt, tiles := a.ptr(0), a.ptr(1), a.ptr(2), a.ptr(3), a.ptr(4), a.ptr(5), a.ptr(6), a.ptr(7)
		maxBlocks, bs, QD, KVD, D, group, scale := a.int(8), a.int(9), a.int(10), a.int(11), a.int(12), a.int(13), a.flt(14)
		if block[0] != flashThreads || int(shared) < flashShared(D) || !flashHeadDim(D) || int(grid[1])*D != QD || int(grid[1])/group*D != KVD {
			panic(fmt.Sprintf("flash_prefill: block %d, shared %d, grid %v for D=%d QD=%d KVD=%d group=%d", block[0], shared, grid, D, QD, KVD, group))
		}
		for k := range int(grid[0]) {
			row0, n := g.i32(tiles, 2*k), g.i32(tiles, 2*k+1)
			if n > flashRows {
				panic(fmt.Sprintf("flash_prefill: tile %d of %d rows", k, n))
			}
			for i := row0; i < row0+n; i++ {
				if g.i32(seq, i) != g.i32(seq, row0) || g.i32(pos, i) != g.i32(pos, row0)+i-row0 {
					panic(fmt.Sprintf("flash_prefill: tile %d's rows are not consecutive positions of one sequence", k))
				}
				for h := range int(grid[1]) {
					g.attendRow(out, q, kc, vc, bt, i, h, g.i32(seq, i), 0, g.i32(pos, i)+1, maxBlocks, bs, QD, KVD, D, group, scale, dt, nil)
				}
			}
		}
	case "bias_act": // (T* out, const float* in, const T* bias, int rows, int cols, int useErf)
		out, in, bias, rows, cols, useErf := a.ptr(0), a.ptr(1), a.ptr(2), a.int(3), a.int(4), a.int(5)
		for k := range rows * cols {
			x := float64(g.f32(in, k) + g.opt(bias, k%cols, dt))
			var y float64
			if useErf != 0 {
				y = 0.5 * x * (1 + math.Erf(x/math.Sqrt2))
			} else {
				y = 0.5 * x * (1 + math.Tanh(0.79788456080286536*(x+0.044715*x*x*x)))
			}
			g.setElem(out, k, dt, float32(y))
		}
	case "silu_mul": // (T* out, const float* in, const T* bias, int rows, int cols)
		out, in, bias, rows, cols := a.ptr(0), a.ptr(1), a.ptr(2), a.int(3), a.int(4)
		for r := range rows {
			for c := range cols {
				gt := float64(g.f32(in, r*2*cols+c) + g.opt(bias, c, dt))
				up := g.f32(in, r*2*cols+cols+c) + g.opt(bias, cols+c, dt)
				g.setElem(out, r*cols+c, dt, float32(gt/(1+math.Exp(-gt)))*up)
			}
		}
	case "residual": // (float* x, const float* in, const T* bias, int rows, int cols)
		x, in, bias, rows, cols := a.ptr(0), a.ptr(1), a.ptr(2), a.int(3), a.int(4)
		for k := range rows * cols {
			g.setF32(x, k, g.f32(x, k)+(g.f32(in, k)+g.opt(bias, k%cols, dt)))
		}
	case "embed_q8": // (float* x, const int8* wq, const u16* ws, const T* wpe, const int* tokens, const int* pos, int C)
		x, wq, ws, wpe, tok, pos, C := a.ptr(0), a.ptr(1), a.ptr(2), a.ptr(3), a.ptr(4), a.ptr(5), a.int(6)
		if C%32 != 0 {
			panic(fmt.Sprintf("embed_q8: C=%d", C))
		}
		for i := range int(grid[0]) {
			t, p := g.i32(tok, i), g.i32(pos, i)
			for c := range C {
				v := g.q8(wq, ws, t*C+c)
				if wpe != 0 {
					v += g.elem(wpe, p*C+c, dt)
				}
				g.setF32(x, i*C+c, v)
			}
		}
	case "q8_gemv1", "q8_gemv2", "q8_gemv4", "q8_gemv8": // (float* out, const T* in, const int8* wq, const u16* ws, int M, int K, int N)
		out, in, wq, ws, M, K, N := a.ptr(0), a.ptr(1), a.ptr(2), a.ptr(3), a.int(4), a.int(5), a.int(6)
		R := int(k[len("q8_gemv"):][0] - '0')
		// The kernel's assumptions: q8GemvOutputs outputs a block, R rows
		// per grid.y, whole warps, 16-byte loads of the quants and of the
		// activations.
		if K%32 != 0 || int(grid[0])*q8GemvOutputs < N || int(grid[1])*R < M || M > q8GemvMaxRows || block[0] > q8GemvMaxThreads || wq%16 != 0 || in%16 != 0 || out%4 != 0 {
			panic(fmt.Sprintf("%s: grid %v block %v for M=%d K=%d N=%d, quants at %#x, input at %#x", k, grid, block, M, K, N, wq, in))
		}
		for r := range M {
			for n := range N {
				var acc float64
				for c := range K {
					acc += float64(g.q8(wq, ws, n*K+c) * g.elem(in, r*K+c, dt))
				}
				g.setF32(out, r*N+n, float32(acc))
			}
		}
	case "q8_dequant": // (T* out, const int8* wq, const u16* ws, int chunks)
		out, wq, ws, chunks := a.ptr(0), a.ptr(1), a.ptr(2), a.int(3)
		if wq%16 != 0 || out%16 != 0 {
			panic(fmt.Sprintf("q8_dequant: quants at %#x, out at %#x", wq, out))
		}
		for i := range 16 * chunks {
			g.setElem(out, i, dt, g.q8(wq, ws, i))
		}
	case "hold_ns": // (long long ns): the profiler's wait; nothing to emulate
	case "argmax_rows": // (int* out, const float* logits, int V)
		out, logits, V := a.ptr(0), a.ptr(1), a.int(2)
		for r := range int(grid[0]) {
			best, bi := float32(-3.4e38), 0
			for v := range V {
				if x := g.f32(logits, r*V+v); x > best {
					best, bi = x, v
				}
			}
			g.setI32(out, r, bi)
		}
	default:
		panic("kernel " + k)
	}
}

// q8 is weight i (flat, row-major) of a Q8_0 matrix in the device layout:
// quants wq (int8) and scales ws (float16, one per 32 weights).
func (g *fakeGPU) q8(wq, ws DevicePtr, i int) float32 {
	sb := g.bytes(ws+DevicePtr(2*(i/32)), 2)
	return f16ToF32(uint16(sb[0])|uint16(sb[1])<<8) * float32(int8(g.bytes(wq+DevicePtr(i), 1)[0]))
}

// opt reads element i of an optional tensor: 0 where p is null (a bias the
// model does not have), as the kernels' opt does.
func (g *fakeGPU) opt(p DevicePtr, i, dt int) float32 {
	if p == 0 {
		return 0
	}
	return g.elem(p, i, dt)
}

// f64 reads element i of a float64 array (the rotary inverse frequencies).
func (g *fakeGPU) f64(p DevicePtr, i int) float64 {
	b := g.bytes(p+DevicePtr(8*i), 8)
	return math.Float64frombits(uint64(le32(b)) | uint64(le32(b[4:]))<<32)
}

// normRow writes the norm of x[src] to out[r], with float64 sums as the
// kernel and the CPU reference do: LayerNorm, or with rms RMSNorm
// (x·float32(1/sqrt(mean(x²)+eps))·w).
func (g *fakeGPU) normRow(out DevicePtr, r int, x DevicePtr, src int, w, b DevicePtr, C int, eps float32, rms bool, dt int) {
	if rms {
		var ss float64
		for c := range C {
			v := float64(g.f32(x, src*C+c))
			ss += v * v
		}
		inv := float32(1 / math.Sqrt(ss/float64(C)+float64(eps)))
		for c := range C {
			g.setElem(out, r*C+c, dt, g.f32(x, src*C+c)*inv*g.elem(w, c, dt))
		}
		return
	}
	var s float64
	for c := range C {
		s += float64(g.f32(x, src*C+c))
	}
	mean := s / float64(C)
	var ss float64
	for c := range C {
		d := float64(g.f32(x, src*C+c)) - mean
		ss += d * d
	}
	inv := 1 / math.Sqrt(ss/float64(C)+float64(eps))
	for c := range C {
		n := float32((float64(g.f32(x, src*C+c)) - mean) * inv)
		g.setElem(out, r*C+c, dt, n*g.elem(w, c, dt)+g.opt(b, c, dt))
	}
}

// blas returns a CuBLAS whose GemmEx computes on g (column-major, as
// cuBLAS defines it).
func (g *fakeGPU) blas() *CuBLAS {
	return &CuBLAS{
		Path:        "fake",
		handle:      1,
		destroy:     func(uintptr) int32 { return 0 },
		setStream:   func(uintptr, Stream) int32 { return 0 },
		setMathMode: func(uintptr, int32) int32 { return 0 },
		setWorkspace: func(h uintptr, ws DevicePtr, n uint64) int32 {
			g.bytes(ws, int(n)) // inside one allocation
			g.workspace = ws
			return 0
		},
		gemmEx: func(h uintptr, ta, tb int32, m, n, k int32, alpha unsafe.Pointer,
			A DevicePtr, atype int32, lda int32, B DevicePtr, btype int32, ldb int32,
			beta unsafe.Pointer, Cp DevicePtr, ctype int32, ldc int32, compute int32, algo int32) int32 {
			al, be := *(*float32)(alpha), *(*float32)(beta)
			// The float32 mode's GEMMs (float32 inputs) are pedantic; the
			// half modes' accumulate in float32 the default way.
			want := int32(ComputeFloat32)
			if atype == 0 {
				want = ComputeFloat32Pedantic
			}
			if compute != want {
				g.t.Errorf("GEMM on type %d inputs with compute type %d, want %d", atype, compute, want)
				return 15 // CUBLAS_STATUS_NOT_SUPPORTED
			}
			// Leading dimensions as cuBLAS checks them.
			rowsA, rowsB := m, k
			if ta == OpT {
				rowsA = k
			}
			if tb == OpT {
				rowsB = n
			}
			if lda < max(1, rowsA) || ldb < max(1, rowsB) || ldc < max(1, m) {
				return 7 // CUBLAS_STATUS_INVALID_VALUE
			}
			if g.emu != nil {
				g.queue(func() {
					g.emu.gemm(ta, tb, m, n, k, al, uintptr(A), atype, lda, uintptr(B), btype, ldb, be, uintptr(Cp), ctype, ldc)
				})
				return 0
			}
			g.queue(func() {
				for j := range int(n) {
					for i := range int(m) {
						var acc float64
						for l := range int(k) {
							ai := i + l*int(lda)
							if ta == OpT {
								ai = l + i*int(lda)
							}
							bi := l + j*int(ldb)
							if tb == OpT {
								bi = j + l*int(ldb)
							}
							acc += float64(g.elem(A, ai, int(atype))) * float64(g.elem(B, bi, int(btype)))
						}
						ci := i + j*int(ldc)
						v := al * float32(acc)
						if be != 0 {
							v += be * g.elem(Cp, ci, int(ctype))
						}
						g.setElem(Cp, ci, int(ctype), v)
					}
				}
			})
			return 0
		},
	}
}

// newFakeBackend builds a Backend on a fake GPU the way NewBackend does,
// with a placeholder kernel image in the cache so that NVRTC is not needed,
// and KV for numBlocks blocks of 16.
func newFakeBackend(t testing.TB, m *model.Model, opts Options, numBlocks int) (*Backend, *fakeGPU) {
	t.Helper()
	g := newFakeGPU(t)
	return fakeBackendOn(t, g, m, opts, numBlocks), g
}

// fakeBackendOn builds the backend on g.
func fakeBackendOn(t testing.TB, g *fakeGPU, m *model.Model, opts Options, numBlocks int) *Backend {
	t.Helper()
	cfg := m.Config
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	dt, err := parseDType(opts.DType)
	if err != nil {
		t.Fatal(err)
	}
	opts.CacheDir = fakeCache(t)
	b := &Backend{m: m, cfg: cfg, opts: opts, dt: dt, log: slog.New(slog.NewTextHandler(io.Discard, nil)), drv: g.driver()}
	if err := b.setup(func(int) (*NVRTC, *CuBLAS, error) { return fakeNVRTC(), g.blas(), nil }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
		if len(g.allocs) != 0 {
			t.Errorf("%d device allocations left after Close", len(g.allocs))
		}
	})
	if err := b.AllocateKV(numBlocks, 16); err != nil {
		t.Fatal(err)
	}
	return b
}

// fakeNVRTC is an NVRTC 12.4 that can only say its version: the fake GPU's
// kernels come from the cache fakeCache fills.
func fakeNVRTC() *NVRTC {
	return &NVRTC{Path: "fake-nvrtc", version: func(major, minor *int32) int32 {
		*major, *minor = 12, 4
		return 0
	}}
}

// fakeNVRTCVersion is fakeNVRTC's part of the cache key.
const fakeNVRTCVersion = "nvrtc-12.4"

// fakeCache is a kernel cache holding a stand-in image for the fake sm_90.
func fakeCache(t testing.TB) string {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, CacheKey(KernelSource(), 90, fakeNVRTCVersion)+".cubin"), []byte("fake cubin"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func kvID(i int) kv.SeqID { return kv.SeqID(i + 1) }

func abs64(x float64) float64 { return math.Abs(x) }

// batchOf builds a batch as stepper.step does, without running it.
func batchOf(s *stepper, parts ...part) *engine.Batch {
	batch := &engine.Batch{}
	for _, p := range parts {
		if ok, err := s.kv.Allocate(p.id, p.start+len(p.tokens)); err != nil || !ok {
			s.t.Fatalf("allocate: %v %v", ok, err)
		}
		batch.Seqs = append(batch.Seqs, engine.SeqBatch{ID: p.id, Tokens: p.tokens, StartPos: p.start,
			BlockTable: s.kv.BlockTable(p.id), Sample: p.sample, NeedLogits: p.needLogits, PromptLogits: p.promptLogits})
		batch.NumTokens += len(p.tokens)
	}
	return batch
}

// attendRow is causal attention of row i, query head h, over positions
// lo..hi-1 of sequence s: with partial nil it writes the normalised output
// to out, else the unnormalised weighted values, the maximum and the sum
// to partial[0..D+1] (attention_split's partials).
func (g *fakeGPU) attendRow(out, q, kc, vc, bt DevicePtr, i, h, s, lo, hi, maxBlocks, bs, QD, KVD, D, group int, scale float32, dt int, partial []float32) {
	kh := (h / group) * D
	sc := make([]float32, hi-lo)
	m := float32(-3e38)
	for j := lo; j < hi; j++ {
		slot := g.i32(bt, s*maxBlocks+j/bs)*bs + j%bs
		var dot float32
		for d := range D {
			dot += g.f32(q, i*QD+h*D+d) * scale * g.elem(kc, slot*KVD+kh+d, dt)
		}
		sc[j-lo] = dot
		m = max(m, dot)
	}
	var sum float32
	for j := range sc {
		sc[j] = float32(math.Exp(float64(sc[j] - m)))
		sum += sc[j]
	}
	for d := range D {
		var acc float32
		for j := lo; j < hi; j++ {
			slot := g.i32(bt, s*maxBlocks+j/bs)*bs + j%bs
			acc += sc[j-lo] * g.elem(vc, slot*KVD+kh+d, dt)
		}
		if partial != nil {
			partial[d] = acc
		} else {
			g.setElem(out, i*QD+h*D+d, dt, acc/sum)
		}
	}
	if partial != nil {
		partial[D], partial[D+1] = m, sum
	}
}
