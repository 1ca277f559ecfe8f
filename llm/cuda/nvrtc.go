package cuda

import (
	"fmt"
	"unsafe"
)

// NVRTC is the CUDA runtime compiler loaded at run time.
type NVRTC struct {
	// Path is the file NVRTC was loaded from.
	Path string

	getErrorString    func(r int32) *byte
	version           func(major, minor *int32) int32
	numSupportedArchs func(n *int32) int32
	supportedArchs    func(archs *int32) int32
	createProgram     func(p *uintptr, src, name string, nHeaders int32, headers, includeNames unsafe.Pointer) int32
	destroyProgram    func(p *uintptr) int32
	compileProgram    func(p uintptr, nOpts int32, opts unsafe.Pointer) int32
	getProgramLogSize func(p uintptr, n *uint64) int32
	getProgramLog     func(p uintptr, log *byte) int32
	getPTXSize        func(p uintptr, n *uint64) int32
	getPTX            func(p uintptr, ptx *byte) int32
	getCUBINSize      func(p uintptr, n *uint64) int32
	getCUBIN          func(p uintptr, cubin *byte) int32
	hasSupportedArchs bool
	hasCUBIN          bool
}

// LoadNVRTC opens NVRTC (lib is LibNVRTC(), or LibNVRTC().ForDriver(v))
// from dirs. Its builtins library (which NVRTC opens
// itself while compiling) is preloaded from the same folder.
func LoadNVRTC(lib Library, dirs []string) (*NVRTC, error) {
	h, path, err := openLibrary(lib, dirs, []string{"libnvrtc-builtins.so.*"})
	if err != nil {
		return nil, err
	}
	n := &NVRTC{Path: path}
	b := &binder{lib: path, handle: h}
	b.bind(&n.getErrorString, "nvrtcGetErrorString")
	b.bind(&n.version, "nvrtcVersion")
	b.bind(&n.createProgram, "nvrtcCreateProgram")
	b.bind(&n.destroyProgram, "nvrtcDestroyProgram")
	b.bind(&n.compileProgram, "nvrtcCompileProgram")
	b.bind(&n.getProgramLogSize, "nvrtcGetProgramLogSize")
	b.bind(&n.getProgramLog, "nvrtcGetProgramLog")
	b.bind(&n.getPTXSize, "nvrtcGetPTXSize")
	b.bind(&n.getPTX, "nvrtcGetPTX")
	n.hasCUBIN = b.optional(&n.getCUBINSize, "nvrtcGetCUBINSize") && b.optional(&n.getCUBIN, "nvrtcGetCUBIN")
	n.hasSupportedArchs = b.optional(&n.numSupportedArchs, "nvrtcGetNumSupportedArchs") && b.optional(&n.supportedArchs, "nvrtcGetSupportedArchs")
	if b.err != nil {
		return nil, b.err
	}
	return n, nil
}

// check turns an nvrtcResult into nil or an *Error.
func (n *NVRTC) check(fn string, r int32) error {
	if r == 0 {
		return nil
	}
	e := &Error{Lib: "nvrtc", Func: fn, Code: int(r)}
	if n.getErrorString != nil {
		e.Name = goString(n.getErrorString(r))
	}
	if e.Name == "" {
		e.Name = statusName(nvrtcResultNames, "NVRTC_ERROR", int(r))
	}
	return e
}

// Version is NVRTC's CUDA version as major, minor.
func (n *NVRTC) Version() (int, int, error) {
	var ma, mi int32
	err := n.check("nvrtcVersion", n.version(&ma, &mi))
	return int(ma), int(mi), err
}

// SupportedArchs lists the SM versions (e.g. 90 for sm_90) this NVRTC can
// generate code for; nil when the release cannot say.
func (n *NVRTC) SupportedArchs() ([]int, error) {
	if !n.hasSupportedArchs {
		return nil, nil
	}
	var cnt int32
	if err := n.check("nvrtcGetNumSupportedArchs", n.numSupportedArchs(&cnt)); err != nil {
		return nil, err
	}
	if cnt <= 0 {
		return nil, nil
	}
	a := make([]int32, cnt)
	if err := n.check("nvrtcGetSupportedArchs", n.supportedArchs(&a[0])); err != nil {
		return nil, err
	}
	out := make([]int, cnt)
	for i, v := range a {
		out[i] = int(v)
	}
	return out, nil
}

// CompileError is a failed compilation with NVRTC's log.
type CompileError struct {
	// Err is the nvrtcCompileProgram status.
	Err error
	// Log is the compiler's output.
	Log string
}

// Error is the status followed by the compiler log.
func (e *CompileError) Error() string { return fmt.Sprintf("%v\n%s", e.Err, e.Log) }

// Unwrap exposes the NVRTC status.
func (e *CompileError) Unwrap() error { return e.Err }

// Compile compiles CUDA C source with opts. With cubin true it returns
// machine code (an sm_XY --gpu-architecture), otherwise NUL-terminated PTX
// (a compute_XY one) that the driver compiles when loading.
func (n *NVRTC) Compile(src, name string, opts []string, cubin bool) ([]byte, error) {
	out, _, err := n.compile(src, name, opts, cubin)
	return out, err
}

// compile is Compile that also returns the compile log (warnings, and
// ptxas's resource report when opts ask for it).
func (n *NVRTC) compile(src, name string, opts []string, cubin bool) ([]byte, string, error) {
	if cubin && !n.hasCUBIN {
		return nil, "", fmt.Errorf("cuda: %s cannot emit cubins (nvrtcGetCUBIN missing)", n.Path)
	}
	var prog uintptr
	if err := n.check("nvrtcCreateProgram", n.createProgram(&prog, src, name, 0, nil, nil)); err != nil {
		return nil, "", err
	}
	defer n.destroyProgram(&prog)
	ptrs := make([]*byte, len(opts)+1)
	for i, o := range opts {
		ptrs[i] = cString(o)
	}
	if err := n.check("nvrtcCompileProgram", n.compileProgram(prog, int32(len(opts)), unsafe.Pointer(&ptrs[0]))); err != nil {
		log := n.log(prog)
		return nil, log, &CompileError{Err: err, Log: log}
	}
	log := n.log(prog)
	sizeFn, getFn, what := n.getPTXSize, n.getPTX, "PTX"
	if cubin {
		sizeFn, getFn, what = n.getCUBINSize, n.getCUBIN, "CUBIN"
	}
	var size uint64
	if err := n.check("nvrtcGet"+what+"Size", sizeFn(prog, &size)); err != nil {
		return nil, log, err
	}
	if size == 0 {
		return nil, log, fmt.Errorf("cuda: nvrtc produced an empty %s", what)
	}
	out := make([]byte, size)
	if err := n.check("nvrtcGet"+what, getFn(prog, &out[0])); err != nil {
		return nil, log, err
	}
	return out, log, nil
}

// log is the program's compile log (best effort: empty on failure).
func (n *NVRTC) log(prog uintptr) string {
	var size uint64
	if n.getProgramLogSize(prog, &size) != 0 || size <= 1 {
		return ""
	}
	buf := make([]byte, size)
	if n.getProgramLog(prog, &buf[0]) != 0 {
		return ""
	}
	return goString(&buf[0])
}
