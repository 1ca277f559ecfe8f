package cuda

import (
	"runtime"
	"unsafe"
)

// cudaDataType values (library_types.h) for the matrices GemmEx reads and
// writes.
const (
	DataFloat32  = 0  // CUDA_R_32F
	DataFloat16  = 2  // CUDA_R_16F
	DataBFloat16 = 14 // CUDA_R_16BF
)

// cuBLAS enums the backend uses (cublas_api.h).
const (
	OpN = 0 // CUBLAS_OP_N
	OpT = 1 // CUBLAS_OP_T

	// ComputeFloat32 is CUBLAS_COMPUTE_32F: float32 accumulation, no TF32,
	// whatever the input type.
	ComputeFloat32 = 68
	// ComputeFloat32Pedantic is CUBLAS_COMPUTE_32F_PEDANTIC: float32 in
	// every phase of the computation, for the float32 comparison mode. The
	// handle's math mode does not reach a GEMM given a compute type, so
	// this is how that mode is asked of cublasGemmEx.
	ComputeFloat32Pedantic = 69
	// GemmDefault lets cuBLAS choose the algorithm (tensor cores allowed
	// for half types).
	GemmDefault = -1

	// MathDefault is CUBLAS_DEFAULT_MATH; MathPedantic forbids reduced
	// precision anywhere, for the float32 comparison mode.
	MathDefault  = 0
	MathPedantic = 2
)

// CuBLAS is cuBLAS loaded at run time, with one handle.
type CuBLAS struct {
	// Path is the file cuBLAS was loaded from.
	Path string

	handle uintptr
	// compute is the cublasComputeType_t every GEMM passes: ComputeFloat32
	// unless SetPedantic chose ComputeFloat32Pedantic.
	compute int32

	getStatusName   func(s int32) *byte
	getStatusString func(s int32) *byte

	create      func(h *uintptr) int32
	destroy     func(h uintptr) int32
	setStream   func(h uintptr, s Stream) int32
	setMathMode func(h uintptr, mode int32) int32
	// setWorkspace is nil in libraries before cublasSetWorkspace (CUDA 11).
	setWorkspace func(h uintptr, ws DevicePtr, bytes uint64) int32
	gemmEx       func(h uintptr, ta, tb int32, m, n, k int32, alpha unsafe.Pointer,
		a DevicePtr, atype int32, lda int32, b DevicePtr, btype int32, ldb int32,
		beta unsafe.Pointer, c DevicePtr, ctype int32, ldc int32, compute int32, algo int32) int32
	gemmStridedBatchedEx func(h uintptr, ta, tb int32, m, n, k int32, alpha unsafe.Pointer,
		a DevicePtr, atype int32, lda int32, strideA int64, b DevicePtr, btype int32, ldb int32, strideB int64,
		beta unsafe.Pointer, c DevicePtr, ctype int32, ldc int32, strideC int64, batch int32, compute int32, algo int32) int32

	// alphaBeta holds the float32 scalars GEMMs read through pointers; in
	// the struct (heap memory) so its address is stable during a call.
	alphaBeta [2]float32
}

// LoadCuBLAS opens cuBLAS (lib is LibCuBLAS(), or LibCuBLAS().ForDriver(v))
// from dirs and creates a handle in the current
// context (the caller has made one current).
func LoadCuBLAS(lib Library, dirs []string) (*CuBLAS, error) {
	h, path, err := openLibrary(lib, dirs, []string{"libcublasLt.so.*"})
	if err != nil {
		return nil, err
	}
	c := &CuBLAS{Path: path}
	b := &binder{lib: path, handle: h}
	b.optional(&c.getStatusName, "cublasGetStatusName")
	b.optional(&c.getStatusString, "cublasGetStatusString")
	b.bind(&c.create, "cublasCreate_v2")
	b.bind(&c.destroy, "cublasDestroy_v2")
	b.bind(&c.setStream, "cublasSetStream_v2")
	b.bind(&c.setMathMode, "cublasSetMathMode")
	b.optional(&c.setWorkspace, "cublasSetWorkspace_v2")
	if sym := b.symbol("cublasGemmEx"); sym != 0 {
		c.gemmEx = func(h uintptr, ta, tb int32, m, n, k int32, alpha unsafe.Pointer,
			a DevicePtr, atype int32, lda int32, b DevicePtr, btype int32, ldb int32,
			beta unsafe.Pointer, c DevicePtr, ctype int32, ldc int32, compute int32, algo int32) int32 {
			// int32 arguments are passed sign-extended, as the C ABI reads
			// only their low 32 bits.
			r := ccall(sym, h, uintptr(ta), uintptr(tb), uintptr(m), uintptr(n), uintptr(k), uintptr(alpha),
				uintptr(a), uintptr(atype), uintptr(lda), uintptr(b), uintptr(btype), uintptr(ldb),
				uintptr(beta), uintptr(c), uintptr(ctype), uintptr(ldc), uintptr(compute), uintptr(algo))
			runtime.KeepAlive(alpha)
			runtime.KeepAlive(beta)
			return int32(r)
		}
	}
	b.bind(&c.gemmStridedBatchedEx, "cublasGemmStridedBatchedEx")
	if b.err != nil {
		return nil, b.err
	}
	if err := c.check("cublasCreate_v2", c.create(&c.handle)); err != nil {
		return nil, err
	}
	return c, nil
}

// check turns a cublasStatus_t into nil or an *Error.
func (c *CuBLAS) check(fn string, r int32) error {
	if r == 0 {
		return nil
	}
	e := &Error{Lib: "cublas", Func: fn, Code: int(r)}
	if c.getStatusName != nil {
		e.Name = goString(c.getStatusName(r))
	}
	if e.Name == "" {
		e.Name = statusName(cublasStatusNames, "CUBLAS_STATUS", int(r))
	}
	if c.getStatusString != nil {
		e.Message = goString(c.getStatusString(r))
	}
	return e
}

// Close destroys the handle.
func (c *CuBLAS) Close() error {
	if c.handle == 0 {
		return nil
	}
	err := c.check("cublasDestroy_v2", c.destroy(c.handle))
	c.handle = 0
	return err
}

// SetStream makes later calls queue their work on s.
func (c *CuBLAS) SetStream(s Stream) error {
	return c.check("cublasSetStream_v2", c.setStream(c.handle, s))
}

// SetWorkspace makes later calls on the current stream use the device
// buffer ws of the given size as cuBLAS's scratch memory instead of
// memory the library allocates itself. It reports false, doing nothing,
// where the library has no cublasSetWorkspace. SetStream resets it.
func (c *CuBLAS) SetWorkspace(ws DevicePtr, bytes int) (bool, error) {
	if c.setWorkspace == nil {
		return false, nil
	}
	return true, c.check("cublasSetWorkspace_v2", c.setWorkspace(c.handle, ws, uint64(bytes)))
}

// SetMathMode sets the handle's math mode (MathDefault, MathPedantic).
// It governs cuBLAS's own routines; GemmEx and GemmStridedBatchedEx take
// their precision from the compute type (see SetPedantic).
func (c *CuBLAS) SetMathMode(mode int) error {
	return c.check("cublasSetMathMode", c.setMathMode(c.handle, int32(mode)))
}

// SetPedantic makes every GEMM use prescribed float32 arithmetic in all
// its phases (CUBLAS_PEDANTIC_MATH and CUBLAS_COMPUTE_32F_PEDANTIC), or,
// with on false, cuBLAS's default float32 accumulation.
func (c *CuBLAS) SetPedantic(on bool) error {
	mode, compute := MathDefault, ComputeFloat32
	if on {
		mode, compute = MathPedantic, ComputeFloat32Pedantic
	}
	if err := c.SetMathMode(mode); err != nil {
		return err
	}
	c.compute = int32(compute)
	return nil
}

// computeType is the compute type the GEMMs pass.
func (c *CuBLAS) computeType() int32 {
	if c.compute == 0 {
		return ComputeFloat32
	}
	return c.compute
}

// Gemm describes one column-major C = alpha·op(A)·op(B) + beta·C, with
// op(A) m×k, op(B) k×n and C m×n, as cuBLAS defines it.
type Gemm struct {
	TransA, TransB int // OpN or OpT
	M, N, K        int
	A              DevicePtr
	AType, LDA     int
	B              DevicePtr
	BType, LDB     int
	C              DevicePtr
	CType, LDC     int
	Alpha, Beta    float32
}

// GemmEx runs g with float32 accumulation (CUBLAS_COMPUTE_32F, or its
// pedantic form after SetPedantic).
func (c *CuBLAS) GemmEx(g Gemm) error {
	c.alphaBeta = [2]float32{g.Alpha, g.Beta}
	return c.check("cublasGemmEx", c.gemmEx(c.handle, int32(g.TransA), int32(g.TransB),
		int32(g.M), int32(g.N), int32(g.K), unsafe.Pointer(&c.alphaBeta[0]),
		g.A, int32(g.AType), int32(g.LDA), g.B, int32(g.BType), int32(g.LDB),
		unsafe.Pointer(&c.alphaBeta[1]), g.C, int32(g.CType), int32(g.LDC), c.computeType(), GemmDefault))
}

// GemmStridedBatchedEx runs count GEMMs shaped like g, the i-th on
// matrices offset by i times the strides (in elements).
func (c *CuBLAS) GemmStridedBatchedEx(g Gemm, strideA, strideB, strideC int64, count int) error {
	c.alphaBeta = [2]float32{g.Alpha, g.Beta}
	return c.check("cublasGemmStridedBatchedEx", c.gemmStridedBatchedEx(c.handle, int32(g.TransA), int32(g.TransB),
		int32(g.M), int32(g.N), int32(g.K), unsafe.Pointer(&c.alphaBeta[0]),
		g.A, int32(g.AType), int32(g.LDA), strideA, g.B, int32(g.BType), int32(g.LDB), strideB,
		unsafe.Pointer(&c.alphaBeta[1]), g.C, int32(g.CType), int32(g.LDC), strideC, int32(count), c.computeType(), GemmDefault))
}
