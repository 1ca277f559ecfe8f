//go:build !amd64 || purego

package f32

import "math"

// Without assembly for this architecture (or with the purego tag) every
// asm hook reports false and the portable Go loops run.

func asmTile(isa, *float32, int, *float32, int, *float32, int, int) bool     { return false }
func asmTileBF16(isa, *float32, int, *float32, int, *uint16, int, int) bool  { return false }
func asmTileHalf(isa, *float32, int, *float32, int, *float32, int, int) bool { return false }
func asmDot(isa, *float32, *float32, int) (float32, bool)                    { return 0, false }
func asmAxpy(isa, *float32, *float32, int, float32) bool                     { return false }
func asmScale(isa, *float32, int, float32) bool                              { return false }
func asmScaleMulAdd(isa, *float32, *float32, *float32, int, float32) bool    { return false }

func asmExpSubSum(isa, *float32, int, float32) (int, float32) { return 0, 0 }
func asmGelu(isa, *float32, int) int                          { return 0 }
func asmSiLUMul(isa, *float32, *float32, int) int             { return 0 }
func asmMax(isa, *float32, int) (int, float32)                { return 0, float32(math.Inf(-1)) }
func asmIndex(isa, *float32, int, float32) (int, int)         { return 0, -1 }

func asmAxpyRows(isa, *float32, *float32, *float32, int, int) bool { return false }
func asmDotRows(isa, *float32, *float32, *float32, int, int) bool  { return false }

// detect returns the portable kernels.
func detect() *kernels { return genericKernels }

// available lists the kernel sets this machine can run, for tests.
func available() []*kernels { return []*kernels{genericKernels} }

func asmDequantQ8(isa, *float32, *byte, int) bool               { return false }
func asmQuantQ8(isa, *int16, *float32, int, *float32, int) bool { return false }
func asmTileQ8Int(int, *float32, int, *int16, int, *float32, int, *byte, int, int) bool {
	return false
}

// q8IntLevel and q8IntLevelAVX2: no integer Q8_0 kernels without the
// assembly.
const q8IntLevel, q8IntLevelAVX2 = q8IntNone, q8IntNone

func asmTileL1(isa, *float32, int, *float32, int, *float32, int, int) bool { return false }

// q8Variants: no other Q8_0 paths to test.
func q8Variants() []*kernels { return nil }
