//go:build ignore

package main

import "fmt"

// q8Block must match f32.q8BlockBytes: one 32×32 block of a Q8_0 panel,
// 32 float16 column scales (64 bytes), then 32 k-rows of 32 int8 values.
const q8Block = 64 + 32*32

// q8Prefetch is how far ahead of the q rows being read the Q8_0 kernels
// fetch into L2: about four blocks, the distance the float32 kernels use
// counted in panel rows (48 rows of 128 bytes) scaled down to 8-bit rows.
const q8Prefetch = 4 * q8Block

// q8Kernel emits the AVX-512 Q8_0 microkernel for rows ≤ 8:
// y[r, 0:32] += Σ_k x[r, k]·d[k/32, 0:32]·q[k, 0:32] over nb blocks of 32
// k. Per k the 32 int8 weights are sign-extended to int32 and converted to
// float32; the activations stay float32, so the only rounding against a
// float32 product is the weights' own (and the order of the sums).
//
// Up to four rows, each block is summed unscaled into block accumulators,
// Σ_kk x·q, which are multiplied by the block's column scales and added to
// the row's total once per block: that saves a multiply per k, which is
// what bounds a decode step once the weights are in cache or nearly so.
// With one or two rows, two sets of block accumulators take alternate k,
// so that no FMA waits on the one before it. Five to eight rows have no
// registers for block accumulators: there each widened weight vector is
// multiplied by its scales once per k and shared by the rows' FMAs.
//
// Arguments (ABI0): y *float32, ldy int (floats), x *float32, ldx int
// (floats), w *byte (the first block), nb int.
func (g *gen) q8Kernel(name string, rows int) {
	g.p("// func %s(y *float32, ldy int, x *float32, ldx int, w *byte, nb int)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	g.q8Args(rows)
	blockAcc := rows <= 4
	sets := 1
	if rows <= 2 {
		sets = 2
	}
	acc := func(r, v int) string { return fmt.Sprintf("Z%d", r*2+v) }
	// Block accumulators of set s, from Z8 (rows ≤ 4 use Z0–Z7 for totals).
	bacc := func(s, r, v int) string { return fmt.Sprintf("Z%d", 8+s*2*rows+r*2+v) }
	for r := range rows {
		for v := range 2 {
			g.p("\tVPXORD %s, %s, %s", acc(r, v), acc(r, v), acc(r, v))
		}
	}
	g.p("\tTESTQ CX, CX")
	g.p("\tJZ %s_store", name)
	g.p("%s_block:", name)
	g.p("\tVCVTPH2PS (DX), Z28")
	g.p("\tVCVTPH2PS 32(DX), Z29")
	if blockAcc {
		for s := range sets {
			for r := range rows {
				for v := range 2 {
					b := bacc(s, r, v)
					g.p("\tVPXORD %s, %s, %s", b, b, b)
				}
			}
		}
	}
	g.p("\tLEAQ 64(DX), AX")
	g.p("\tMOVQ $8, BX")
	g.p("%s_loop:", name)
	// Two cache lines of q rows per four k.
	g.p("\tPREFETCHT1 %d(AX)", q8Prefetch)
	g.p("\tPREFETCHT1 %d(AX)", q8Prefetch+64)
	for kk := range 4 {
		w0, w1 := 30, 31
		if blockAcc && kk%2 == 1 {
			w0, w1 = 26, 27 // let consecutive k widen in parallel
		}
		g.p("\tVPMOVSXBD %d(AX), Z%d", kk*32, w0)
		g.p("\tVPMOVSXBD %d(AX), Z%d", kk*32+16, w1)
		g.p("\tVCVTDQ2PS Z%d, Z%d", w0, w0)
		g.p("\tVCVTDQ2PS Z%d, Z%d", w1, w1)
		if !blockAcc {
			g.p("\tVMULPS Z28, Z%d, Z%d", w0, w0)
			g.p("\tVMULPS Z29, Z%d, Z%d", w1, w1)
		}
		for r := range rows {
			b := fmt.Sprintf("Z%d", 16+r)
			g.p("\tVBROADCASTSS %s, %s", rowAddr(r, kk*4, "SI", "R9", "R10", "R12"), b)
			a0, a1 := acc(r, 0), acc(r, 1)
			if blockAcc {
				a0, a1 = bacc(kk%sets, r, 0), bacc(kk%sets, r, 1)
			}
			g.p("\tVFMADD231PS Z%d, %s, %s", w0, b, a0)
			g.p("\tVFMADD231PS Z%d, %s, %s", w1, b, a1)
		}
	}
	g.q8Advance(rows, 128)
	g.p("\tDECQ BX")
	g.p("\tJNZ %s_loop", name)
	if blockAcc {
		for r := range rows {
			for v := range 2 {
				if sets == 2 {
					g.p("\tVADDPS %s, %s, %s", bacc(1, r, v), bacc(0, r, v), bacc(0, r, v))
				}
				g.p("\tVFMADD231PS Z%d, %s, %s", 28+v, bacc(0, r, v), acc(r, v))
			}
		}
	}
	g.p("\tMOVQ AX, DX")
	g.p("\tDECQ CX")
	g.p("\tJNZ %s_block", name)
	g.p("%s_store:", name)
	for r := range rows {
		for v := range 2 {
			ad := rowAddr(r, v*64, "DI", "R8", "R11", "R13")
			g.p("\tVADDPS %s, %s, %s", ad, acc(r, v), acc(r, v))
			g.p("\tVMOVUPS %s, %s", acc(r, v), ad)
		}
	}
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

// q8Args loads the arguments common to the Q8_0 kernels: y in DI (stride
// R8 bytes), x in SI (stride R9), the block pointer in DX, nb in CX, and
// the row-3 and row-6 bases rowAddr needs.
func (g *gen) q8Args(rows int) {
	g.p("\tMOVQ y+0(FP), DI")
	g.p("\tMOVQ ldy+8(FP), R8")
	g.p("\tSHLQ $2, R8")
	g.p("\tMOVQ x+16(FP), SI")
	g.p("\tMOVQ ldx+24(FP), R9")
	g.p("\tSHLQ $2, R9")
	g.p("\tMOVQ w+32(FP), DX")
	g.p("\tMOVQ nb+40(FP), CX")
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
}

// q8Advance steps the x row pointers by four k and the q pointer by four
// q rows (qBytes).
func (g *gen) q8Advance(rows, qBytes int) {
	g.p("\tADDQ $16, SI")
	if rows > 3 {
		g.p("\tADDQ $16, R10")
	}
	if rows > 6 {
		g.p("\tADDQ $16, R12")
	}
	g.p("\tADDQ $%d, AX", qBytes)
}

// q8HalfKernel emits the AVX2 Q8_0 kernel for one half panel (16
// columns), rows ≤ 5: sixteen YMM registers cannot hold a full panel's
// four weight vectors, four scale vectors and accumulators for more than
// one row, so, as the float32 half kernels do, two calls cover a panel.
// The half's scales and q values are at different offsets within a
// block, so they come as two pointers, both stepping a block at a time.
//
// Arguments (ABI0): y *float32, ldy int, x *float32, ldx int, s *byte
// (the half's scales in the first block), q *byte (its q values), nb int.
func (g *gen) q8HalfKernel(name string, rows int) {
	g.p("// func %s(y *float32, ldy int, x *float32, ldx int, s, q *byte, nb int)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-56", name)
	g.p("\tMOVQ y+0(FP), DI")
	g.p("\tMOVQ ldy+8(FP), R8")
	g.p("\tSHLQ $2, R8")
	g.p("\tMOVQ x+16(FP), SI")
	g.p("\tMOVQ ldx+24(FP), R9")
	g.p("\tSHLQ $2, R9")
	g.p("\tMOVQ s+32(FP), DX")
	g.p("\tMOVQ q+40(FP), AX")
	g.p("\tMOVQ nb+48(FP), CX")
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
	g.p("%s_block:", name)
	g.p("\tVCVTPH2PS (DX), Y12")
	g.p("\tVCVTPH2PS 16(DX), Y13")
	g.p("\tMOVQ $8, BX")
	g.p("%s_loop:", name)
	g.p("\tPREFETCHT1 %d(AX)", q8Prefetch)
	g.p("\tPREFETCHT1 %d(AX)", q8Prefetch+64)
	for kk := range 4 {
		g.p("\tVPMOVSXBD %d(AX), Y10", kk*32)
		g.p("\tVPMOVSXBD %d(AX), Y11", kk*32+8)
		g.p("\tVCVTDQ2PS Y10, Y10")
		g.p("\tVCVTDQ2PS Y11, Y11")
		g.p("\tVMULPS Y12, Y10, Y10")
		g.p("\tVMULPS Y13, Y11, Y11")
		for r := range rows {
			g.p("\tVBROADCASTSS %s, Y14", rowAddr(r, kk*4, "SI", "R9", "R10", ""))
			g.p("\tVFMADD231PS Y10, Y14, %s", acc(r, 0))
			g.p("\tVFMADD231PS Y11, Y14, %s", acc(r, 1))
		}
	}
	g.q8Advance(rows, 128)
	g.p("\tDECQ BX")
	g.p("\tJNZ %s_loop", name)
	// AX has passed the block's 32 q rows: on to the next block's q rows.
	g.p("\tADDQ $64, AX")
	g.p("\tADDQ $%d, DX", q8Block)
	g.p("\tDECQ CX")
	g.p("\tJNZ %s_block", name)
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

// q8Dequant emits func name(dst *float32, w *byte, nb int): nb blocks of a
// Q8_0 panel widened to float32 panel rows (32 floats per k), d·q exactly
// as the direct kernels compute each weight, for products of many rows,
// which then run the float32 kernels on an L1-resident slice.
func (g *gen) q8Dequant(name string, avx512 bool) {
	g.p("// func %s(dst *float32, w *byte, nb int)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-24", name)
	g.p("\tMOVQ dst+0(FP), DI")
	g.p("\tMOVQ w+8(FP), DX")
	g.p("\tMOVQ nb+16(FP), CX")
	g.p("\tTESTQ CX, CX")
	g.p("\tJZ %s_done", name)
	g.p("%s_block:", name)
	reg, vecs, lanes := "Y", 4, 8
	if avx512 {
		reg, vecs, lanes = "Z", 2, 16
	}
	for v := range vecs {
		g.p("\tVCVTPH2PS %d(DX), %s%d", v*lanes*2, reg, 8+v)
	}
	g.p("\tLEAQ 64(DX), AX")
	g.p("\tMOVQ $32, BX")
	g.p("%s_loop:", name)
	for v := range vecs {
		g.p("\tVPMOVSXBD %d(AX), %s%d", v*lanes, reg, v)
		g.p("\tVCVTDQ2PS %s%d, %s%d", reg, v, reg, v)
		g.p("\tVMULPS %s%d, %s%d, %s%d", reg, 8+v, reg, v, reg, v)
		g.p("\tVMOVUPS %s%d, %d(DI)", reg, v, v*lanes*4)
	}
	g.p("\tADDQ $32, AX")
	g.p("\tADDQ $128, DI")
	g.p("\tDECQ BX")
	g.p("\tJNZ %s_loop", name)
	g.p("\tMOVQ AX, DX")
	g.p("\tDECQ CX")
	g.p("\tJNZ %s_block", name)
	g.p("%s_done:", name)
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

// q8Kernels emits every Q8_0 kernel.
func (g *gen) q8Kernels() {
	for r := 1; r <= 8; r++ {
		g.q8Kernel(fmt.Sprintf("mulQ8AVX512R%d", r), r)
	}
	for r := 1; r <= 4; r++ {
		g.q8HalfKernel(fmt.Sprintf("mulQ8AVX2HalfR%d", r), r)
	}
	// The float32 kernels without prefetches, for the widened slice.
	g.noPrefetch = true
	for r := 1; r <= 8; r++ {
		g.matKernel(fmt.Sprintf("mulL1AVX512R%d", r), r, true, false)
	}
	g.noPrefetch = false
	g.q8Dequant("dequantQ8AVX512", true)
	g.q8Dequant("dequantQ8AVX2", false)
}
