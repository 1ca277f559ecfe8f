package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// DevicePtr is a device memory address (CUdeviceptr).
type DevicePtr uint64

// Opaque driver handles (pointers owned by the driver).
type (
	// Context is a CUcontext.
	Context uintptr
	// Stream is a CUstream; 0 is the legacy default stream.
	Stream uintptr
	// Event is a CUevent.
	Event uintptr
	// Module is a CUmodule: loaded kernel code.
	Module uintptr
	// Function is a CUfunction: one kernel of a Module.
	Function uintptr
	// Graph is a CUgraph captured from a stream.
	Graph uintptr
	// GraphExec is a CUgraphExec: an instantiated Graph ready to launch.
	GraphExec uintptr
)

// Device attributes the backend reads (CUdevice_attribute).
const (
	AttrMultiprocessorCount    = 16
	AttrComputeCapabilityMajor = 75
	AttrComputeCapabilityMinor = 76
)

// Stream capture modes (CUstreamCaptureMode).
const (
	CaptureModeGlobal      = 0
	CaptureModeThreadLocal = 1
	CaptureModeRelaxed     = 2
)

// Driver is the CUDA driver API loaded from libcuda.so.1. Its methods are
// thin typed wrappers: each checks the CUresult and returns an *Error with
// the driver's own name and message.
type Driver struct {
	// Path is the file the driver was loaded from.
	Path string

	getErrorName   func(code int32, str **byte) int32
	getErrorString func(code int32, str **byte) int32

	init             func(flags uint32) int32
	driverGetVersion func(v *int32) int32
	deviceGetCount   func(n *int32) int32
	deviceGet        func(dev *int32, ordinal int32) int32
	deviceGetAttr    func(v *int32, attr int32, dev int32) int32
	deviceGetName    func(name *byte, n int32, dev int32) int32
	deviceTotalMem   func(bytes *uint64, dev int32) int32

	primaryCtxRetain  func(ctx *Context, dev int32) int32
	primaryCtxRelease func(dev int32) int32
	ctxSetCurrent     func(ctx Context) int32
	ctxSynchronize    func() int32

	memAlloc     func(p *DevicePtr, bytes uint64) int32
	memFree      func(p DevicePtr) int32
	memGetInfo   func(free, total *uint64) int32
	memAllocHost func(p *unsafe.Pointer, bytes uint64) int32
	memFreeHost  func(p unsafe.Pointer) int32
	memcpyHtoD   func(dst DevicePtr, src unsafe.Pointer, bytes uint64, s Stream) int32
	memcpyDtoH   func(dst unsafe.Pointer, src DevicePtr, bytes uint64, s Stream) int32
	memsetD8     func(dst DevicePtr, v uint8, n uint64, s Stream) int32

	streamCreate  func(s *Stream, flags uint32) int32
	streamDestroy func(s Stream) int32
	streamSync    func(s Stream) int32

	eventCreate  func(e *Event, flags uint32) int32
	eventRecord  func(e Event, s Stream) int32
	eventSync    func(e Event) int32
	eventElapsed func(ms *float32, start, end Event) int32
	// eventElapsedName is the symbol eventElapsed is bound to, "" if none.
	eventElapsedName string
	eventDestroy     func(e Event) int32

	moduleLoadData    func(m *Module, image unsafe.Pointer) int32
	moduleGetFunction func(f *Function, m Module, name string) int32
	moduleUnload      func(m Module) int32
	launchKernel      func(f Function, gx, gy, gz, bx, by, bz uint32, shared uint32, s Stream, params unsafe.Pointer, extra unsafe.Pointer) int32

	streamBeginCapture func(s Stream, mode int32) int32
	streamEndCapture   func(s Stream, g *Graph) int32
	graphInstantiate   func(e *GraphExec, g Graph, flags uint64) int32
	graphLaunch        func(e GraphExec, s Stream) int32
	graphExecDestroy   func(e GraphExec) int32
	graphDestroy       func(g Graph) int32
}

// LoadDriver opens the CUDA driver from dirs (see SearchDirs) or, failing
// that, through the system loader, and binds every call the package uses.
// It does not call cuInit.
func LoadDriver(dirs []string) (*Driver, error) {
	h, path, err := openLibrary(LibCUDA(), dirs, nil)
	if err != nil {
		return nil, err
	}
	return bindDriver(h, path)
}

// systemLoaderPlace is how a NotFoundError names the system loader's search.
const systemLoaderPlace = "the system loader's search path (LD_LIBRARY_PATH, ld.so.cache)"

// LoadSystemDriver opens libcuda.so.1 by its soname through the system's
// dynamic loader (LD_LIBRARY_PATH, then ld.so.cache): the driver the CUDA
// runtime, and so PyTorch and nvidia-smi's CUDA programs, load. Where a
// machine has more than one libcuda.so.1 (an image's own beside the one
// matching the kernel module, mounted into /usr/local/nvidia and named in
// ld.so.conf.d), that is the one that matches; a folder list can pick the
// other, whose cuInit then fails. Path is the file actually mapped, read
// from /proc/self/maps. It returns a *NotFoundError where the loader finds
// none, or finds the toolkit's link-time stub (in a "stubs" folder; it
// fails every call with CUDA_ERROR_STUB_LIBRARY).
func LoadSystemDriver() (*Driver, error) {
	const soname = "libcuda.so.1"
	nf := &NotFoundError{Lib: LibCUDA(), Searched: []string{systemLoaderPlace}}
	h, err := purego.Dlopen(soname, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, nf
	}
	path := soname
	if maps, err := os.ReadFile("/proc/self/maps"); err == nil {
		if p := mappedLibrary(string(maps), "libcuda.so"); p != "" {
			path = p
		}
	}
	if filepath.Base(filepath.Dir(path)) == "stubs" {
		_ = purego.Dlclose(h)
		nf.Searched[0] += " (found only the stub " + path + ")"
		return nil, nf
	}
	return bindDriver(h, path)
}

// mappedLibrary returns the path of the first file in maps (the text of
// /proc/self/maps) whose name starts with prefix, or "".
func mappedLibrary(maps, prefix string) string {
	for line := range strings.Lines(maps) {
		// address perms offset dev inode path: the path is the sixth field
		// and may hold spaces.
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		p := strings.Join(f[5:], " ")
		if strings.HasPrefix(p, "/") && strings.HasPrefix(filepath.Base(p), prefix) {
			return p
		}
	}
	return ""
}

// bindDriver binds every call the package uses from the driver opened as h
// from path.
func bindDriver(h uintptr, path string) (*Driver, error) {
	d := &Driver{Path: path}
	b := &binder{lib: path, handle: h}
	b.bind(&d.getErrorName, "cuGetErrorName")
	b.bind(&d.getErrorString, "cuGetErrorString")
	b.bind(&d.init, "cuInit")
	b.bind(&d.driverGetVersion, "cuDriverGetVersion")
	b.bind(&d.deviceGetCount, "cuDeviceGetCount")
	b.bind(&d.deviceGet, "cuDeviceGet")
	b.bind(&d.deviceGetAttr, "cuDeviceGetAttribute")
	b.bind(&d.deviceGetName, "cuDeviceGetName")
	b.bind(&d.deviceTotalMem, "cuDeviceTotalMem_v2")
	b.bind(&d.primaryCtxRetain, "cuDevicePrimaryCtxRetain")
	b.bind(&d.primaryCtxRelease, "cuDevicePrimaryCtxRelease_v2")
	b.bind(&d.ctxSetCurrent, "cuCtxSetCurrent")
	b.bind(&d.ctxSynchronize, "cuCtxSynchronize")
	b.bind(&d.memAlloc, "cuMemAlloc_v2")
	b.bind(&d.memFree, "cuMemFree_v2")
	b.bind(&d.memGetInfo, "cuMemGetInfo_v2")
	b.bind(&d.memAllocHost, "cuMemAllocHost_v2")
	b.bind(&d.memFreeHost, "cuMemFreeHost")
	if sym := b.symbol("cuMemcpyHtoDAsync_v2"); sym != 0 {
		d.memcpyHtoD = func(dst DevicePtr, src unsafe.Pointer, n uint64, s Stream) int32 {
			r := ccall(sym, uintptr(dst), uintptr(src), uintptr(n), uintptr(s))
			runtime.KeepAlive(src)
			return int32(r)
		}
	}
	if sym := b.symbol("cuMemcpyDtoHAsync_v2"); sym != 0 {
		d.memcpyDtoH = func(dst unsafe.Pointer, src DevicePtr, n uint64, s Stream) int32 {
			r := ccall(sym, uintptr(dst), uintptr(src), uintptr(n), uintptr(s))
			runtime.KeepAlive(dst)
			return int32(r)
		}
	}
	b.bind(&d.memsetD8, "cuMemsetD8Async")
	b.bind(&d.streamCreate, "cuStreamCreate")
	b.bind(&d.streamDestroy, "cuStreamDestroy_v2")
	if sym := b.symbol("cuStreamSynchronize"); sym != 0 {
		d.streamSync = func(s Stream) int32 {
			return int32(ccall(sym, uintptr(s)))
		}
	}
	b.bind(&d.eventCreate, "cuEventCreate")
	b.bind(&d.eventRecord, "cuEventRecord")
	b.bind(&d.eventSync, "cuEventSynchronize")
	// CUDA 13's header maps cuEventElapsedTime to a _v2; drivers keep the
	// old symbol for older binaries. Neither is needed to serve, so a
	// driver without them still loads.
	d.eventElapsedName = "cuEventElapsedTime_v2"
	if !b.optional(&d.eventElapsed, d.eventElapsedName) {
		d.eventElapsedName = "cuEventElapsedTime"
		if !b.optional(&d.eventElapsed, d.eventElapsedName) {
			d.eventElapsedName = ""
		}
	}
	b.bind(&d.eventDestroy, "cuEventDestroy_v2")
	b.bind(&d.moduleLoadData, "cuModuleLoadData")
	b.bind(&d.moduleGetFunction, "cuModuleGetFunction")
	b.bind(&d.moduleUnload, "cuModuleUnload")
	if sym := b.symbol("cuLaunchKernel"); sym != 0 {
		d.launchKernel = func(f Function, gx, gy, gz, bx, by, bz uint32, shared uint32, s Stream, params unsafe.Pointer, extra unsafe.Pointer) int32 {
			r := ccall(sym, uintptr(f), uintptr(gx), uintptr(gy), uintptr(gz), uintptr(bx), uintptr(by), uintptr(bz),
				uintptr(shared), uintptr(s), uintptr(params), uintptr(extra))
			runtime.KeepAlive(params)
			runtime.KeepAlive(extra)
			return int32(r)
		}
	}
	b.bind(&d.streamBeginCapture, "cuStreamBeginCapture_v2")
	b.bind(&d.streamEndCapture, "cuStreamEndCapture")
	b.bind(&d.graphInstantiate, "cuGraphInstantiateWithFlags")
	if sym := b.symbol("cuGraphLaunch"); sym != 0 {
		d.graphLaunch = func(e GraphExec, s Stream) int32 {
			return int32(ccall(sym, uintptr(e), uintptr(s)))
		}
	}
	b.bind(&d.graphExecDestroy, "cuGraphExecDestroy")
	b.bind(&d.graphDestroy, "cuGraphDestroy")
	if b.err != nil {
		return nil, b.err
	}
	return d, nil
}

// check turns a CUresult into nil or an *Error named by the driver itself.
func (d *Driver) check(fn string, r int32) error {
	if r == cudaSuccess {
		return nil
	}
	e := &Error{Lib: "driver", Func: fn, Code: int(r)}
	var p *byte
	if d.getErrorName != nil && d.getErrorName(r, &p) == cudaSuccess {
		e.Name = goString(p)
	}
	p = nil
	if d.getErrorString != nil && d.getErrorString(r, &p) == cudaSuccess {
		e.Message = goString(p)
	}
	if e.Name == "" {
		e.Name = fmt.Sprintf("CUDA_ERROR_%d", r)
	}
	return e
}

// Init is cuInit(0); it must precede every other call.
func (d *Driver) Init() error { return d.check("cuInit", d.init(0)) }

// Version is the driver's CUDA version, e.g. 12040 for 12.4.
func (d *Driver) Version() (int, error) {
	var v int32
	err := d.check("cuDriverGetVersion", d.driverGetVersion(&v))
	return int(v), err
}

// DeviceCount is the number of visible CUDA devices.
func (d *Driver) DeviceCount() (int, error) {
	var n int32
	err := d.check("cuDeviceGetCount", d.deviceGetCount(&n))
	return int(n), err
}

// Device returns the handle of the ordinal-th device.
func (d *Driver) Device(ordinal int) (int32, error) {
	var dev int32
	err := d.check("cuDeviceGet", d.deviceGet(&dev, int32(ordinal)))
	return dev, err
}

// Attribute reads one device attribute (Attr* constants).
func (d *Driver) Attribute(dev int32, attr int) (int, error) {
	var v int32
	err := d.check("cuDeviceGetAttribute", d.deviceGetAttr(&v, int32(attr), dev))
	return int(v), err
}

// DeviceName is the device's marketing name.
func (d *Driver) DeviceName(dev int32) (string, error) {
	buf := make([]byte, 256)
	if err := d.check("cuDeviceGetName", d.deviceGetName(&buf[0], int32(len(buf)), dev)); err != nil {
		return "", err
	}
	return goString(&buf[0]), nil
}

// TotalMem is the device's memory in bytes.
func (d *Driver) TotalMem(dev int32) (uint64, error) {
	var n uint64
	err := d.check("cuDeviceTotalMem_v2", d.deviceTotalMem(&n, dev))
	return n, err
}

// PrimaryCtxRetain retains the device's primary context (the one the CUDA
// runtime and cuBLAS also use), so all three share allocations.
func (d *Driver) PrimaryCtxRetain(dev int32) (Context, error) {
	var c Context
	err := d.check("cuDevicePrimaryCtxRetain", d.primaryCtxRetain(&c, dev))
	return c, err
}

// PrimaryCtxRelease releases a PrimaryCtxRetain.
func (d *Driver) PrimaryCtxRelease(dev int32) error {
	return d.check("cuDevicePrimaryCtxRelease_v2", d.primaryCtxRelease(dev))
}

// SetCurrent binds ctx to the calling OS thread. Go moves goroutines
// between threads, so callers lock the thread first.
func (d *Driver) SetCurrent(ctx Context) error {
	return d.check("cuCtxSetCurrent", d.ctxSetCurrent(ctx))
}

// Synchronize waits for all work in the current context.
func (d *Driver) Synchronize() error { return d.check("cuCtxSynchronize", d.ctxSynchronize()) }

// MemAlloc allocates bytes of device memory.
func (d *Driver) MemAlloc(bytes int) (DevicePtr, error) {
	var p DevicePtr
	err := d.check("cuMemAlloc_v2", d.memAlloc(&p, uint64(bytes)))
	return p, err
}

// MemFree frees MemAlloc'd memory; 0 is a no-op.
func (d *Driver) MemFree(p DevicePtr) error {
	if p == 0 {
		return nil
	}
	return d.check("cuMemFree_v2", d.memFree(p))
}

// MemInfo is the free and total memory of the current context's device.
func (d *Driver) MemInfo() (free, total uint64, err error) {
	err = d.check("cuMemGetInfo_v2", d.memGetInfo(&free, &total))
	return free, total, err
}

// MemAllocHost allocates page-locked host memory, which asynchronous
// copies need to be truly asynchronous.
func (d *Driver) MemAllocHost(bytes int) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	err := d.check("cuMemAllocHost_v2", d.memAllocHost(&p, uint64(bytes)))
	return p, err
}

// MemFreeHost frees MemAllocHost memory; nil is a no-op.
func (d *Driver) MemFreeHost(p unsafe.Pointer) error {
	if p == nil {
		return nil
	}
	return d.check("cuMemFreeHost", d.memFreeHost(p))
}

// CopyHtoD queues a copy of bytes from host src to device dst on s.
func (d *Driver) CopyHtoD(dst DevicePtr, src unsafe.Pointer, bytes int, s Stream) error {
	return d.check("cuMemcpyHtoDAsync_v2", d.memcpyHtoD(dst, src, uint64(bytes), s))
}

// CopyDtoH queues a copy of bytes from device src to host dst on s.
func (d *Driver) CopyDtoH(dst unsafe.Pointer, src DevicePtr, bytes int, s Stream) error {
	return d.check("cuMemcpyDtoHAsync_v2", d.memcpyDtoH(dst, src, uint64(bytes), s))
}

// Memset queues setting n bytes at dst to v on s.
func (d *Driver) Memset(dst DevicePtr, v byte, n int, s Stream) error {
	return d.check("cuMemsetD8Async", d.memsetD8(dst, v, uint64(n), s))
}

// StreamCreate creates a non-blocking stream (flag 1: no implicit
// synchronisation with the legacy default stream).
func (d *Driver) StreamCreate() (Stream, error) {
	var s Stream
	err := d.check("cuStreamCreate", d.streamCreate(&s, 1))
	return s, err
}

// StreamDestroy destroys s.
func (d *Driver) StreamDestroy(s Stream) error {
	return d.check("cuStreamDestroy_v2", d.streamDestroy(s))
}

// StreamSync waits for everything queued on s.
func (d *Driver) StreamSync(s Stream) error {
	return d.check("cuStreamSynchronize", d.streamSync(s))
}

// EventCreate creates an event with timing enabled.
func (d *Driver) EventCreate() (Event, error) {
	var e Event
	err := d.check("cuEventCreate", d.eventCreate(&e, 0))
	return e, err
}

// EventRecord records e on s.
func (d *Driver) EventRecord(e Event, s Stream) error {
	return d.check("cuEventRecord", d.eventRecord(e, s))
}

// EventSync waits for e.
func (d *Driver) EventSync(e Event) error { return d.check("cuEventSynchronize", d.eventSync(e)) }

// EventElapsed is the time between two recorded events in milliseconds.
func (d *Driver) EventElapsed(start, end Event) (float32, error) {
	if d.eventElapsed == nil {
		return 0, fmt.Errorf("cuda: the driver at %s has no cuEventElapsedTime", d.Path)
	}
	var ms float32
	err := d.check(d.eventElapsedName, d.eventElapsed(&ms, start, end))
	return ms, err
}

// EventDestroy destroys e.
func (d *Driver) EventDestroy(e Event) error { return d.check("cuEventDestroy_v2", d.eventDestroy(e)) }

// ModuleLoad loads a cubin, or NUL-terminated PTX that the driver then
// compiles for the current device.
func (d *Driver) ModuleLoad(image []byte) (Module, error) {
	if len(image) == 0 {
		return 0, fmt.Errorf("cuda: cuModuleLoadData: empty image")
	}
	var m Module
	err := d.check("cuModuleLoadData", d.moduleLoadData(&m, unsafe.Pointer(&image[0])))
	return m, err
}

// Function looks a kernel up by its (extern "C") name.
func (d *Driver) Function(m Module, name string) (Function, error) {
	var f Function
	if err := d.check("cuModuleGetFunction", d.moduleGetFunction(&f, m, name)); err != nil {
		return 0, fmt.Errorf("kernel %s: %w", name, err)
	}
	return f, nil
}

// ModuleUnload unloads m.
func (d *Driver) ModuleUnload(m Module) error { return d.check("cuModuleUnload", d.moduleUnload(m)) }

// Launch queues kernel f on s. params points at an array of pointers, one
// per kernel parameter, each pointing at that parameter's value; the
// memory must stay live (and unmoved) until the call returns, which Go heap
// memory does.
func (d *Driver) Launch(f Function, grid, block [3]uint32, shared uint32, s Stream, params unsafe.Pointer) error {
	return d.check("cuLaunchKernel", d.launchKernel(f, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared, s, params, nil))
}

// BeginCapture starts recording s's work into a graph instead of running it.
func (d *Driver) BeginCapture(s Stream, mode int) error {
	return d.check("cuStreamBeginCapture_v2", d.streamBeginCapture(s, int32(mode)))
}

// EndCapture stops recording and returns the captured graph.
func (d *Driver) EndCapture(s Stream) (Graph, error) {
	var g Graph
	err := d.check("cuStreamEndCapture", d.streamEndCapture(s, &g))
	return g, err
}

// GraphInstantiate makes g launchable.
func (d *Driver) GraphInstantiate(g Graph) (GraphExec, error) {
	var e GraphExec
	err := d.check("cuGraphInstantiateWithFlags", d.graphInstantiate(&e, g, 0))
	return e, err
}

// GraphLaunch queues an instantiated graph on s.
func (d *Driver) GraphLaunch(e GraphExec, s Stream) error {
	return d.check("cuGraphLaunch", d.graphLaunch(e, s))
}

// GraphExecDestroy destroys an instantiated graph.
func (d *Driver) GraphExecDestroy(e GraphExec) error {
	return d.check("cuGraphExecDestroy", d.graphExecDestroy(e))
}

// GraphDestroy destroys a captured graph.
func (d *Driver) GraphDestroy(g Graph) error { return d.check("cuGraphDestroy", d.graphDestroy(g)) }
