//go:build ignore

// gen writes kernels_amd64.s: the register-blocked matrix microkernels and
// the vector helpers, for AVX-512 and AVX2+FMA. Every kernel of a family
// differs only in how many rows it carries, so writing them out by hand
// would be six near-identical copies; generating them keeps one source of
// truth without adding a dependency (avo) to the main module.
//
// Run with `go generate ./internal/f32/` (see generate.go); the vector
// helpers are in gen_vector.go, the Q8_0 kernels in gen_q8.go.
package main

import (
	"bytes"
	"fmt"
	"log"
	"os"
)

// panelWidth must match f32.PanelWidth: floats per packed panel row.
const panelWidth = 32

type gen struct {
	bytes.Buffer
	// noPrefetch leaves out matKernel's prefetches: for kernels whose
	// panel is an L1-resident scratch slice (gen_q8.go's widened Q8_0).
	noPrefetch bool
}

func (g *gen) p(format string, args ...any) {
	fmt.Fprintf(&g.Buffer, format, args...)
	g.WriteByte('\n')
}

// rowAddr returns the operand addressing row i of a matrix whose row 0 is
// at base, with the row stride in bytes in stride, base+3·stride in base3
// and base+6·stride in base6. Only scales 1, 2, 4 and 8 exist, so rows 3,
// 5, 6 and 7 go through base3 or base6.
func rowAddr(i int, off int, base, stride, base3, base6 string) string {
	o := ""
	if off != 0 {
		o = fmt.Sprint(off)
	}
	switch i {
	case 0:
		return fmt.Sprintf("%s(%s)", o, base)
	case 1:
		return fmt.Sprintf("%s(%s)(%s*1)", o, base, stride)
	case 2:
		return fmt.Sprintf("%s(%s)(%s*2)", o, base, stride)
	case 3:
		return fmt.Sprintf("%s(%s)", o, base3)
	case 4:
		return fmt.Sprintf("%s(%s)(%s*4)", o, base, stride)
	case 5:
		return fmt.Sprintf("%s(%s)(%s*2)", o, base3, stride)
	case 6:
		return fmt.Sprintf("%s(%s)", o, base6)
	case 7:
		return fmt.Sprintf("%s(%s)(%s*4)", o, base3, stride)
	}
	panic("row out of range")
}

// matKernel emits y[r, 0:32] += Σ_k x[r, k]·w[k, 0:32] for rows r < rows,
// with vecs vectors of lanes floats covering the 32 panel columns. With
// bf16 the panel holds bfloat16 values, widened to float32 as they load
// (zero-extend each 16-bit value to 32 bits, shift it into the high half).
//
// Arguments (ABI0): y *float32, ldy int (floats), x *float32, ldx int
// (floats), w (panel start, rows of 32 values), k int.
func (g *gen) matKernel(name string, rows int, avx512, bf16 bool) {
	vecs, vb, reg := 4, 32, "Y"
	if avx512 {
		vecs, vb, reg = 2, 64, "Z"
	}
	wtype, rowBytes := "*float32", panelWidth*4
	if bf16 {
		wtype, rowBytes = "*uint16", panelWidth*2
	}
	g.p("// func %s(y *float32, ldy int, x *float32, ldx int, w %s, k int)", name, wtype)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	g.p("\tMOVQ y+0(FP), DI")
	g.p("\tMOVQ ldy+8(FP), R8")
	g.p("\tSHLQ $2, R8")
	g.p("\tMOVQ x+16(FP), SI")
	g.p("\tMOVQ ldx+24(FP), R9")
	g.p("\tSHLQ $2, R9")
	g.p("\tMOVQ w+32(FP), DX")
	g.p("\tMOVQ k+40(FP), CX")
	if rows > 3 {
		g.p("\tLEAQ (SI)(R9*2), R10")
		g.p("\tADDQ R9, R10")
		g.p("\tLEAQ (DI)(R8*2), R11")
		g.p("\tADDQ R8, R11")
	}
	if rows > 6 {
		g.p("\tLEAQ (R10)(R9*2), R12")
		g.p("\tADDQ R9, R12")
		g.p("\tLEAQ (R11)(R8*2), R13")
		g.p("\tADDQ R8, R13")
	}
	acc := func(r, v int) string { return fmt.Sprintf("%s%d", reg, r*vecs+v) }
	for r := range rows {
		for v := range vecs {
			a := acc(r, v)
			if avx512 {
				g.p("\tVPXORD %s, %s, %s", a, a, a)
			} else {
				g.p("\tVXORPS %s, %s, %s", a, a, a)
			}
		}
	}
	g.p("\tTESTQ CX, CX")
	g.p("\tJZ %s_store", name)
	g.p("%s_loop:", name)
	// Fetch 48 panel rows ahead into L2. When the panel comes from memory
	// (a decode step), the out-of-order window alone keeps too few misses
	// in flight, the more so the more rows a kernel carries (more cycles
	// per panel row): on a Sapphire Rapids VM this took batch 4 −9% and
	// bfloat16 batch 1 −10% per 124M decode step. An L1 prefetch 16 rows
	// ahead as well helped there in noisy runs, but on Zen 5 (the machine
	// class of the CPU issue) dropping it made the step faster in every
	// paired run: batch 1 −7%, batch 4 −10%, batch 8 −10 to −15%, bfloat16
	// batch 1 −4 to −20% (and the AVX2 half-panel kernels: batch 8 and
	// prefill-128 faster in 5 of 6 pairs each); the hardware brings L2
	// lines into L1 in time, and the extra instructions cost issue slots.
	// Prefetches past the panel's end are harmless.
	for off := 0; off < rowBytes && !g.noPrefetch; off += 64 {
		g.p("\tPREFETCHT1 %d(DX)", 48*rowBytes+off)
	}
	if bf16 {
		// Widen the panel row into registers first: 2 ZMM, or 4 YMM (which
		// is why the AVX2 bf16 kernels carry at most two rows).
		w0 := 30 // above every AVX-512 accumulator
		if !avx512 {
			w0 = 8
		}
		for v := range vecs {
			wr := fmt.Sprintf("%s%d", reg, w0+v)
			g.p("\tVPMOVZXWD %d(DX), %s", v*vb/2, wr)
			g.p("\tVPSLLD $16, %s, %s", wr, wr)
		}
		for r := range rows {
			if avx512 {
				g.bcastFMAs(r, w0, vecs, acc)
				continue
			}
			b := fmt.Sprintf("Y%d", 12+r)
			g.p("\tVBROADCASTSS %s, %s", rowAddr(r, 0, "SI", "R9", "R10", "R12"), b)
			for v := range vecs {
				g.p("\tVFMADD231PS Y%d, %s, %s", w0+v, b, acc(r, v))
			}
		}
	} else if avx512 {
		// Both panel vectors in registers, each row's x[r, k] broadcast
		// into a register once for its two FMAs.
		g.p("\tVMOVUPS (DX), Z30")
		g.p("\tVMOVUPS 64(DX), Z31")
		for r := range rows {
			g.bcastFMAs(r, 30, vecs, acc)
		}
	} else {
		// Twelve accumulators leave no room for four panel registers, so
		// the panel is the FMA's memory operand (an L1 hit after the first
		// row) and x[r, k] is broadcast into a register per row.
		for r := range rows {
			b := fmt.Sprintf("Y%d", 12+r)
			g.p("\tVBROADCASTSS %s, %s", rowAddr(r, 0, "SI", "R9", "R10", "R12"), b)
			for v := range vecs {
				g.p("\tVFMADD231PS %d(DX), %s, %s", v*vb, b, acc(r, v))
			}
		}
	}
	g.p("\tADDQ $4, SI")
	if rows > 3 {
		g.p("\tADDQ $4, R10")
	}
	if rows > 6 {
		g.p("\tADDQ $4, R12")
	}
	g.p("\tADDQ $%d, DX", rowBytes)
	g.p("\tDECQ CX")
	g.p("\tJNZ %s_loop", name)
	g.p("%s_store:", name)
	for r := range rows {
		for v := range vecs {
			ad := rowAddr(r, v*vb, "DI", "R8", "R11", "R13")
			g.p("\tVADDPS %s, %s, %s", ad, acc(r, v), acc(r, v))
			g.p("\tVMOVUPS %s, %s", acc(r, v), ad)
		}
	}
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

// halfKernel emits the AVX2 kernel for the rows of one half panel:
// y[r, 0:16] += Σ_k x[r, k]·w[k, 0:16] for r < rows ≤ 6, where w steps by
// a full panel row (32 floats) per k. Two calls cover a panel. With the
// panel half in two registers and one broadcast per row, a k step costs 2
// + rows loads for 2·rows FMAs, against 4·rows + rows for the full-width
// AVX2 kernel, which must take the panel as a memory operand: the
// difference matters once the panel is in cache (prefill, large batches).
func (g *gen) halfKernel(name string, rows int) {
	g.p("// func %s(y *float32, ldy int, x *float32, ldx int, w *float32, k int)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	g.p("\tMOVQ y+0(FP), DI")
	g.p("\tMOVQ ldy+8(FP), R8")
	g.p("\tSHLQ $2, R8")
	g.p("\tMOVQ x+16(FP), SI")
	g.p("\tMOVQ ldx+24(FP), R9")
	g.p("\tSHLQ $2, R9")
	g.p("\tMOVQ w+32(FP), DX")
	g.p("\tMOVQ k+40(FP), CX")
	if rows > 3 {
		g.p("\tLEAQ (SI)(R9*2), R10")
		g.p("\tADDQ R9, R10")
		g.p("\tLEAQ (DI)(R8*2), R11")
		g.p("\tADDQ R8, R11")
	}
	acc := func(r, v int) string { return fmt.Sprintf("Y%d", r*2+v) }
	for r := range rows {
		for v := range 2 {
			g.p("\tVXORPS %s, %s, %s", acc(r, v), acc(r, v), acc(r, v))
		}
	}
	g.p("\tTESTQ CX, CX")
	g.p("\tJZ %s_store", name)
	g.p("%s_loop:", name)
	g.p("\tPREFETCHT1 %d(DX)", 48*panelWidth*4)
	g.p("\tVMOVUPS (DX), Y12")
	g.p("\tVMOVUPS 32(DX), Y13")
	for r := range rows {
		g.p("\tVBROADCASTSS %s, Y14", rowAddr(r, 0, "SI", "R9", "R10", ""))
		g.p("\tVFMADD231PS Y12, Y14, %s", acc(r, 0))
		g.p("\tVFMADD231PS Y13, Y14, %s", acc(r, 1))
	}
	g.p("\tADDQ $4, SI")
	if rows > 3 {
		g.p("\tADDQ $4, R10")
	}
	g.p("\tADDQ $%d, DX", panelWidth*4)
	g.p("\tDECQ CX")
	g.p("\tJNZ %s_loop", name)
	g.p("%s_store:", name)
	for r := range rows {
		for v := range 2 {
			ad := rowAddr(r, v*32, "DI", "R8", "R11", "")
			g.p("\tVADDPS %s, %s, %s", ad, acc(r, v), acc(r, v))
			g.p("\tVMOVUPS %s, %s", acc(r, v), ad)
		}
	}
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

func main() {
	var g gen
	g.p("// Code generated by gen.go; DO NOT EDIT.")
	g.p("")
	g.p("//go:build amd64 && !purego")
	g.p("")
	g.p("#include \"textflag.h\"")
	g.p("")
	for r := 1; r <= 8; r++ {
		g.matKernel(fmt.Sprintf("mulAVX512R%d", r), r, true, false)
	}
	for r := 1; r <= 3; r++ {
		g.matKernel(fmt.Sprintf("mulAVX2R%d", r), r, false, false)
	}
	for r := 1; r <= 8; r++ {
		g.matKernel(fmt.Sprintf("mulBF16AVX512R%d", r), r, true, true)
	}
	for r := 1; r <= 6; r++ {
		g.halfKernel(fmt.Sprintf("mulAVX2HalfR%d", r), r)
	}
	for r := 1; r <= 2; r++ {
		g.matKernel(fmt.Sprintf("mulBF16AVX2R%d", r), r, false, true)
	}
	g.dot("dotAVX512", true)
	g.dot("dotAVX2", false)
	g.axpy("axpyAVX512", true, false)
	g.axpy("axpyAVX2", false, false)
	g.axpy("scaleAVX512", true, true)
	g.axpy("scaleAVX2", false, true)
	g.scaleMulAdd("scaleMulAddAVX512", true)
	g.scaleMulAdd("scaleMulAddAVX2", false)
	g.axpyRows("axpyRowsAVX512", true)
	g.axpyRows("axpyRowsAVX2", false)
	g.dotRows("dotRowsAVX512", true)
	g.dotRows("dotRowsAVX2", false)
	g.constTable()
	g.expSubSum("expSubSumAVX512", true)
	g.expSubSum("expSubSumAVX2", false)
	g.gelu("geluAVX512", true)
	g.gelu("geluAVX2", false)
	g.siluMul("siluMulAVX512", true)
	g.siluMul("siluMulAVX2", false)
	g.maxVec("maxAVX512", true)
	g.maxVec("maxAVX2", false)
	g.indexVec("indexAVX512", true)
	g.indexVec("indexAVX2", false)
	g.q8Kernels()
	if err := os.WriteFile("kernels_amd64.s", g.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}
