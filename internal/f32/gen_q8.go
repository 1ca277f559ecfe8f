//go:build ignore

package main

import (
	"fmt"
	"math"
)

// q8Block must match f32.q8BlockBytes: one 32×32 block of a Q8_0 panel,
// 32 float16 column scales (64 bytes), then 16 pairs of k, each 64 bytes:
// columns 0–15 then 16–31, every column's two int8 values (k even, k odd)
// side by side.
const q8Block = 64 + 32*32

// q8Prefetch is how far ahead of the block being read the integer Q8_0
// kernels fetch into L2: four blocks, the distance the float32 kernels
// use counted in panel rows (48 rows of 128 bytes) scaled to 8-bit rows.
const q8Prefetch = 4 * q8Block

// q8MaxRows is the most rows an integer Q8_0 kernel carries (f32.q8IntMR):
// four registers a row (two int32 block sums, two float32 totals) leave
// eight for the weights, scales and broadcast activations.
const q8MaxRows = 6

// q8MaxRowsAVX2 is the most rows an AVX2 integer Q8_0 kernel carries
// (f32.q8IntMRAVX2).
const q8MaxRowsAVX2 = 3

// q8IntKernel emits the AVX-512BW integer Q8_0 microkernel for rows ≤ 6:
//
//	y[r, 0:32] += Σ_b dx[b, r]·d[b, 0:32]·Σ_kk xq[r, 32b+kk]·q[32b+kk, 0:32]
//
// where xq are the activations quantized to int16 per block of 32 with
// scale dx (Q8Rows) and q, d the weights' int8 values and float16 scales.
// A pair of k of 16 columns is 32 bytes, widened to int16 by one
// VPMOVSXBW; one VPDPWSSD then multiplies it by the row's broadcast pair
// of activations and adds both products into the column's int32 sum: two
// instructions and a broadcast per 32 weights per row, against seven
// (widen to int32, convert, scale, FMA) when the activations were
// float32, which made decode compute-bound. Without VNNI (vnni false)
// VPMADDWD+VPADDD do the same in two. The sums are exact (|x·q| ≤
// 32767·127, 32 of them fit int32); once per block they are converted,
// scaled by dx (broadcast from memory) and added into the float32 totals
// with the columns' scales.
//
// Arguments (ABI0): y *float32, ldy int (floats), x *int16 (quantized
// row 0 at the first block), ldx int (int16s), s *float32 (dx of row 0,
// first block), lds int (floats between blocks' scales: rows of a block
// are adjacent), w *byte (the first block), nb int.
func (g *gen) q8IntKernel(name string, rows int, vnni bool) {
	g.p("// func %s(y *float32, ldy int, x *int16, ldx int, s *float32, lds int, w *byte, nb int)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-64", name)
	g.p("\tMOVQ y+0(FP), DI")
	g.p("\tMOVQ ldy+8(FP), R8")
	g.p("\tSHLQ $2, R8")
	g.p("\tMOVQ x+16(FP), SI")
	g.p("\tMOVQ ldx+24(FP), R9")
	g.p("\tSHLQ $1, R9")
	g.p("\tMOVQ s+32(FP), BX")
	g.p("\tMOVQ lds+40(FP), R12")
	g.p("\tSHLQ $2, R12")
	g.p("\tMOVQ w+48(FP), DX")
	g.p("\tMOVQ nb+56(FP), CX")
	if rows > 3 {
		g.p("\tLEAQ (SI)(R9*2), R10")
		g.p("\tADDQ R9, R10")
		g.p("\tLEAQ (DI)(R8*2), R11")
		g.p("\tADDQ R8, R11")
	}
	tot := func(r, h int) string { return fmt.Sprintf("Z%d", 2*r+h) }
	iacc := func(r, h int) string { return fmt.Sprintf("Z%d", 12+2*r+h) }
	for r := range rows {
		for h := range 2 {
			g.p("\tVPXORD %s, %s, %s", tot(r, h), tot(r, h), tot(r, h))
		}
	}
	g.p("\tTESTQ CX, CX")
	g.p("\tJZ %s_store", name)
	g.p("%s_block:", name)
	for i := range q8Block / 64 {
		g.p("\tPREFETCHT1 %d(DX)", q8Prefetch+64*i)
	}
	for p := range 16 {
		// With VNNI, alternate pairs use separate registers so that one
		// pair's widening overlaps the other's products; without it two
		// registers hold VPMADDWD's products before VPADDD.
		w0, w1, bx := 24, 25, 30
		if vnni && p%2 == 1 {
			w0, w1, bx = 26, 27, 31
		}
		g.p("\tVPMOVSXBW %d(DX), Z%d", 64+64*p, w0)
		g.p("\tVPMOVSXBW %d(DX), Z%d", 64+64*p+32, w1)
		for r := range rows {
			g.p("\tVPBROADCASTD %s, Z%d", rowAddr(r, 4*p, "SI", "R9", "R10", ""), bx)
			for h, w := range []int{w0, w1} {
				a := iacc(r, h)
				switch {
				case p == 0:
					// The block's first pair starts the sums afresh.
					g.p("\tVPMADDWD Z%d, Z%d, %s", bx, w, a)
				case vnni:
					g.p("\tVPDPWSSD Z%d, Z%d, %s", bx, w, a)
				default:
					g.p("\tVPMADDWD Z%d, Z%d, Z%d", bx, w, 26+h)
					g.p("\tVPADDD Z%d, %s, %s", 26+h, a, a)
				}
			}
		}
	}
	g.p("\tVCVTPH2PS (DX), Z28")
	g.p("\tVCVTPH2PS 32(DX), Z29")
	for r := range rows {
		for h := range 2 {
			a := iacc(r, h)
			g.p("\tVCVTDQ2PS %s, %s", a, a)
			g.p("\tVMULPS.BCST %d(BX), %s, %s", 4*r, a, a)
			g.p("\tVFMADD231PS Z%d, %s, %s", 28+h, a, tot(r, h))
		}
	}
	g.p("\tADDQ $%d, DX", q8Block)
	g.p("\tADDQ $64, SI")
	if rows > 3 {
		g.p("\tADDQ $64, R10")
	}
	g.p("\tADDQ R12, BX")
	g.p("\tDECQ CX")
	g.p("\tJNZ %s_block", name)
	g.p("%s_store:", name)
	for r := range rows {
		for h := range 2 {
			ad := rowAddr(r, h*64, "DI", "R8", "R11", "")
			g.p("\tVADDPS %s, %s, %s", ad, tot(r, h), tot(r, h))
			g.p("\tVMOVUPS %s, %s", tot(r, h), ad)
		}
	}
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

// q8Quant emits func name(q *int16, s *float32, lds int, x *float32, nb
// int): nb blocks of 32 floats of one row quantized to int16, q =
// round(x·2^(14−E)) saturated to int16, where 2^E ≤ amax < 2^(E+1) for
// the block's largest |x|, and the block's scale 2^(E−14) written to s,
// s+lds, … (lds floats apart).
//
// A power of two, not amax/32767, so that x·2^(14−E) is exact: the
// quantized block then moves only where a value crosses a rounding
// boundary, instead of the whole block re-rounding whenever amax moves
// by an ulp. Two runs whose activations differ in the last bit (another
// batch shape, another path to the same weights) thus give logits that
// differ by about as little as float32 products would; the cost is at
// most one bit of the sixteen (the step is at most amax/16384). amax is
// clamped below at 2^−100, so an all-zero block gives zeros (and a tiny
// scale). The rounding is the CPU's default, to nearest even; VPMOVSDW
// saturates the one value that can round up to 32768. AVX-512F.
func (g *gen) q8Quant(name string) {
	g.p("// func %s(q *int16, s *float32, lds int, x *float32, nb int)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-40", name)
	g.p("\tMOVQ q+0(FP), DI")
	g.p("\tMOVQ s+8(FP), BX")
	g.p("\tMOVQ lds+16(FP), R12")
	g.p("\tSHLQ $2, R12")
	g.p("\tMOVQ x+24(FP), SI")
	g.p("\tMOVQ nb+32(FP), CX")
	g.p("\tMOVL $0x7fffffff, AX")
	g.p("\tVPBROADCASTD AX, Z15")
	g.p("\tMOVL $0x%08x, AX", math.Float32bits(0x1p-100))
	g.p("\tVMOVD AX, X9")
	g.p("\tTESTQ CX, CX")
	g.p("\tJZ %s_done", name)
	g.p("%s_loop:", name)
	g.p("\tVMOVUPS (SI), Z0")
	g.p("\tVMOVUPS 64(SI), Z1")
	g.p("\tVPANDD Z15, Z0, Z2")
	g.p("\tVPANDD Z15, Z1, Z3")
	g.p("\tVMAXPS Z3, Z2, Z2")
	g.p("\tVEXTRACTF64X4 $1, Z2, Y3")
	g.p("\tVMAXPS Y3, Y2, Y2")
	g.p("\tVEXTRACTF128 $1, Y2, X3")
	g.p("\tVMAXPS X3, X2, X2")
	g.p("\tVPERMILPS $0x4e, X2, X3")
	g.p("\tVMAXPS X3, X2, X2")
	g.p("\tVPERMILPS $0xb1, X2, X3")
	g.p("\tVMAXPS X3, X2, X2")
	g.p("\tVMAXSS X9, X2, X2")
	// The biased exponent E+127 of amax gives both powers of two.
	g.p("\tVMOVD X2, AX")
	g.p("\tSHRL $23, AX")
	g.p("\tMOVL $%d, DX", 127+14+127)
	g.p("\tSUBL AX, DX")
	g.p("\tSHLL $23, DX")
	g.p("\tSUBL $14, AX")
	g.p("\tSHLL $23, AX")
	g.p("\tMOVL AX, (BX)")
	g.p("\tVMOVD DX, X5")
	g.p("\tVBROADCASTSS X5, Z5")
	g.p("\tVMULPS Z5, Z0, Z0")
	g.p("\tVMULPS Z5, Z1, Z1")
	g.p("\tVCVTPS2DQ Z0, Z0")
	g.p("\tVCVTPS2DQ Z1, Z1")
	g.p("\tVPMOVSDW Z0, (DI)")
	g.p("\tVPMOVSDW Z1, 32(DI)")
	g.p("\tADDQ $128, SI")
	g.p("\tADDQ $64, DI")
	g.p("\tADDQ R12, BX")
	g.p("\tDECQ CX")
	g.p("\tJNZ %s_loop", name)
	g.p("%s_done:", name)
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

// q8IntHalfAVX2 emits the AVX2 integer Q8_0 kernel for one half panel
// (16 columns), rows ≤ 3: q8IntKernel's products with VPMADDWD+VPADDD on
// eight columns at a time (16 bytes of a pair widen to one YMM of int16
// pairs). Sixteen YMM registers hold three rows' sums and totals for 16
// columns, so, as the float32 AVX2 kernels do, two calls cover a panel.
// w points 32·h bytes into the first block for half h: the half's scales
// are then at w and w+16 and its q values at 64+64·i and +16 for pair i.
//
// Arguments (ABI0): as q8IntKernel's.
func (g *gen) q8IntHalfAVX2(name string, rows int) {
	g.p("// func %s(y *float32, ldy int, x *int16, ldx int, s *float32, lds int, w *byte, nb int)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-64", name)
	g.p("\tMOVQ y+0(FP), DI")
	g.p("\tMOVQ ldy+8(FP), R8")
	g.p("\tSHLQ $2, R8")
	g.p("\tMOVQ x+16(FP), SI")
	g.p("\tMOVQ ldx+24(FP), R9")
	g.p("\tSHLQ $1, R9")
	g.p("\tMOVQ s+32(FP), BX")
	g.p("\tMOVQ lds+40(FP), R12")
	g.p("\tSHLQ $2, R12")
	g.p("\tMOVQ w+48(FP), DX")
	g.p("\tMOVQ nb+56(FP), CX")
	tot := func(r, q int) string { return fmt.Sprintf("Y%d", 2*r+q) }
	iacc := func(r, q int) string { return fmt.Sprintf("Y%d", 6+2*r+q) }
	for r := range rows {
		for q := range 2 {
			g.p("\tVPXOR %s, %s, %s", tot(r, q), tot(r, q), tot(r, q))
		}
	}
	g.p("\tTESTQ CX, CX")
	g.p("\tJZ %s_store", name)
	g.p("%s_block:", name)
	for i := range q8Block / 64 {
		g.p("\tPREFETCHT1 %d(DX)", q8Prefetch+64*i)
	}
	for p := range 16 {
		g.p("\tVPMOVSXBW %d(DX), Y12", 64+64*p)
		g.p("\tVPMOVSXBW %d(DX), Y13", 64+64*p+16)
		for r := range rows {
			g.p("\tVPBROADCASTD %s, Y14", rowAddr(r, 4*p, "SI", "R9", "", ""))
			for q := range 2 {
				a := iacc(r, q)
				if p == 0 {
					g.p("\tVPMADDWD Y14, Y%d, %s", 12+q, a)
					continue
				}
				g.p("\tVPMADDWD Y14, Y%d, Y15", 12+q)
				g.p("\tVPADDD Y15, %s, %s", a, a)
			}
		}
	}
	g.p("\tVCVTPH2PS (DX), Y12")
	g.p("\tVCVTPH2PS 16(DX), Y13")
	for r := range rows {
		g.p("\tVBROADCASTSS %d(BX), Y14", 4*r)
		for q := range 2 {
			a := iacc(r, q)
			g.p("\tVCVTDQ2PS %s, %s", a, a)
			g.p("\tVMULPS Y14, %s, %s", a, a)
			g.p("\tVFMADD231PS Y%d, %s, %s", 12+q, a, tot(r, q))
		}
	}
	g.p("\tADDQ $%d, DX", q8Block)
	g.p("\tADDQ $64, SI")
	g.p("\tADDQ R12, BX")
	g.p("\tDECQ CX")
	g.p("\tJNZ %s_block", name)
	g.p("%s_store:", name)
	for r := range rows {
		for q := range 2 {
			ad := rowAddr(r, q*32, "DI", "R8", "", "")
			g.p("\tVADDPS %s, %s, %s", ad, tot(r, q), tot(r, q))
			g.p("\tVMOVUPS %s, %s", tot(r, q), ad)
		}
	}
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

// q8QuantAVX2 emits q8Quant for AVX2: the same values and scales (the
// conversion rounds to nearest even as well; VPACKSSDW saturates, and
// VPERMQ undoes its interleaving of the 128-bit lanes).
func (g *gen) q8QuantAVX2(name string) {
	g.p("// func %s(q *int16, s *float32, lds int, x *float32, nb int)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-40", name)
	g.p("\tMOVQ q+0(FP), DI")
	g.p("\tMOVQ s+8(FP), BX")
	g.p("\tMOVQ lds+16(FP), R12")
	g.p("\tSHLQ $2, R12")
	g.p("\tMOVQ x+24(FP), SI")
	g.p("\tMOVQ nb+32(FP), CX")
	g.p("\tMOVL $0x7fffffff, AX")
	g.p("\tMOVQ AX, X15")
	g.p("\tVPBROADCASTD X15, Y15")
	g.p("\tMOVL $0x%08x, AX", math.Float32bits(0x1p-100))
	g.p("\tMOVQ AX, X9")
	g.p("\tTESTQ CX, CX")
	g.p("\tJZ %s_done", name)
	g.p("%s_loop:", name)
	for v := range 4 {
		g.p("\tVMOVUPS %d(SI), Y%d", 32*v, v)
		g.p("\tVANDPS Y15, Y%d, Y%d", v, 4+v)
	}
	g.p("\tVMAXPS Y5, Y4, Y4")
	g.p("\tVMAXPS Y7, Y6, Y6")
	g.p("\tVMAXPS Y6, Y4, Y4")
	g.p("\tVEXTRACTF128 $1, Y4, X5")
	g.p("\tVMAXPS X5, X4, X4")
	g.p("\tVPERMILPS $0x4e, X4, X5")
	g.p("\tVMAXPS X5, X4, X4")
	g.p("\tVPERMILPS $0xb1, X4, X5")
	g.p("\tVMAXPS X5, X4, X4")
	g.p("\tVMAXSS X9, X4, X4")
	g.p("\tVMOVD X4, AX")
	g.p("\tSHRL $23, AX")
	g.p("\tMOVL $%d, DX", 127+14+127)
	g.p("\tSUBL AX, DX")
	g.p("\tSHLL $23, DX")
	g.p("\tSUBL $14, AX")
	g.p("\tSHLL $23, AX")
	g.p("\tMOVL AX, (BX)")
	g.p("\tVMOVD DX, X5")
	g.p("\tVBROADCASTSS X5, Y5")
	for v := range 4 {
		g.p("\tVMULPS Y5, Y%d, Y%d", v, v)
		g.p("\tVCVTPS2DQ Y%d, Y%d", v, v)
	}
	g.p("\tVPACKSSDW Y1, Y0, Y0")
	g.p("\tVPACKSSDW Y3, Y2, Y2")
	g.p("\tVPERMQ $0xd8, Y0, Y0")
	g.p("\tVPERMQ $0xd8, Y2, Y2")
	g.p("\tVMOVDQU Y0, (DI)")
	g.p("\tVMOVDQU Y2, 32(DI)")
	g.p("\tADDQ $128, SI")
	g.p("\tADDQ $64, DI")
	g.p("\tADDQ R12, BX")
	g.p("\tDECQ CX")
	g.p("\tJNZ %s_loop", name)
	g.p("%s_done:", name)
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

// q8Dequant emits func name(dst *float32, w *byte, nb int): nb blocks of a
// Q8_0 panel widened to float32 panel rows (32 floats per k), d·q, for
// the paths that run the float32 kernels on an L1-resident slice. A pair
// of k widens to int16 (VPMOVSXBW), each 32-bit lane then holding one
// column's even k in its low half and odd k in its high half: a shift
// left and an arithmetic shift right sign-extend the even one, an
// arithmetic shift the odd one. The AVX-512 version needs AVX-512BW; the
// AVX2 one takes eight columns (16 bytes) at a time.
func (g *gen) q8Dequant(name string, avx512 bool) {
	g.p("// func %s(dst *float32, w *byte, nb int)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-24", name)
	g.p("\tMOVQ dst+0(FP), DI")
	g.p("\tMOVQ w+8(FP), DX")
	g.p("\tMOVQ nb+16(FP), CX")
	g.p("\tTESTQ CX, CX")
	g.p("\tJZ %s_done", name)
	g.p("%s_block:", name)
	// vecs column groups of lanes columns, each from bytes 2·lanes·v of a
	// pair, with its scales in register 8+v.
	reg, vecs, lanes := "Y", 4, 8
	if avx512 {
		reg, vecs, lanes = "Z", 2, 16
	}
	for v := range vecs {
		g.p("\tVCVTPH2PS %d(DX), %s%d", v*lanes*2, reg, 8+v)
	}
	g.p("\tLEAQ 64(DX), AX")
	g.p("\tMOVQ $16, BX")
	g.p("%s_loop:", name)
	for v := range vecs {
		g.p("\tVPMOVSXBW %d(AX), %s0", v*lanes*2, reg)
		g.p("\tVPSLLD $16, %s0, %s1", reg, reg)
		g.p("\tVPSRAD $16, %s1, %s1", reg, reg)
		g.p("\tVPSRAD $16, %s0, %s0", reg, reg)
		g.p("\tVCVTDQ2PS %s1, %s1", reg, reg)
		g.p("\tVCVTDQ2PS %s0, %s0", reg, reg)
		g.p("\tVMULPS %s%d, %s1, %s1", reg, 8+v, reg, reg)
		g.p("\tVMULPS %s%d, %s0, %s0", reg, 8+v, reg, reg)
		g.p("\tVMOVUPS %s1, %d(DI)", reg, v*lanes*4)
		g.p("\tVMOVUPS %s0, %d(DI)", reg, 128+v*lanes*4)
	}
	g.p("\tADDQ $64, AX")
	g.p("\tADDQ $256, DI")
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
	for r := 1; r <= q8MaxRows; r++ {
		g.q8IntKernel(fmt.Sprintf("mulQ8VNNIR%d", r), r, true)
	}
	for r := 1; r <= q8MaxRows; r++ {
		g.q8IntKernel(fmt.Sprintf("mulQ8MaddR%d", r), r, false)
	}
	g.q8Quant("quantQ8AVX512")
	for r := 1; r <= q8MaxRowsAVX2; r++ {
		g.q8IntHalfAVX2(fmt.Sprintf("mulQ8AVX2HalfR%d", r), r)
	}
	g.q8QuantAVX2("quantQ8AVX2")
	// The float32 kernels without prefetches, for the widened slice.
	g.noPrefetch = true
	for r := 1; r <= 8; r++ {
		g.matKernel(fmt.Sprintf("mulL1AVX512R%d", r), r, true, false)
	}
	g.noPrefetch = false
	g.q8Dequant("dequantQ8AVX512", true)
	g.q8Dequant("dequantQ8AVX2", false)
}
