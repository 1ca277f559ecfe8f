//go:build ignore

// The vector helpers of gen.go: element-wise loops, dot products, exp and
// GELU, maxima and searches, and attention's row kernels. Run with gen.go
// (see generate.go).

package main

import "fmt"

// scaleMulAdd emits y[i] = (y[i]·a)·g[i] + b[i] over n floats: layer
// norm's last pass (a = 1/σ on the centred row, then gain and bias).
//
// Arguments (ABI0): y, gain, bias *float32, n int, a float32.
func (g *gen) scaleMulAdd(name string, avx512 bool) {
	reg, lanes := "Y", 8
	if avx512 {
		reg, lanes = "Z", 16
	}
	vb := lanes * 4
	g.p("// func %s(y, gain, bias *float32, n int, a float32)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-36", name)
	g.p("\tMOVQ y+0(FP), DI")
	g.p("\tMOVQ gain+8(FP), SI")
	g.p("\tMOVQ bias+16(FP), DX")
	g.p("\tMOVQ n+24(FP), CX")
	g.p("\tVBROADCASTSS a+32(FP), %s15", reg)
	step := func(n int) {
		for i := range n {
			g.p("\tVMULPS %d(DI), %s15, %s%d", i*vb, reg, reg, i)
		}
		for i := range n {
			g.p("\tVMOVUPS %d(SI), %s%d", i*vb, reg, 4+i)
			g.p("\tVFMADD213PS %d(DX), %s%d, %s%d", i*vb, reg, 4+i, reg, i)
		}
		for i := range n {
			g.p("\tVMOVUPS %s%d, %d(DI)", reg, i, i*vb)
		}
		g.p("\tADDQ $%d, DI", n*vb)
		g.p("\tADDQ $%d, SI", n*vb)
		g.p("\tADDQ $%d, DX", n*vb)
		g.p("\tSUBQ $%d, CX", n*lanes)
	}
	g.elementLoop(name, lanes, step, func() {
		g.p("\tVMULSS (DI), X15, X0")
		g.p("\tVMOVSS (SI), X1")
		g.p("\tVFMADD213SS (DX), X1, X0")
		g.p("\tVMOVSS X0, (DI)")
		g.p("\tADDQ $4, DI")
		g.p("\tADDQ $4, SI")
		g.p("\tADDQ $4, DX")
	})
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

// elementLoop emits the loop of an element-wise kernel over CX floats:
// step(4) while at least four vectors remain, step(1) while one does, then
// tail() once per remaining float (tail advances the pointers; the loop
// counts). The kernel's epilogue follows the label name_done.
func (g *gen) elementLoop(name string, lanes int, step func(n int), tail func()) {
	g.p("%s_l4:", name)
	g.p("\tCMPQ CX, $%d", 4*lanes)
	g.p("\tJLT %s_l1", name)
	step(4)
	g.p("\tJMP %s_l4", name)
	g.p("%s_l1:", name)
	g.p("\tCMPQ CX, $%d", lanes)
	g.p("\tJLT %s_tailcheck", name)
	step(1)
	g.p("\tJMP %s_l1", name)
	g.p("%s_tailcheck:", name)
	g.p("\tTESTQ CX, CX")
	g.p("\tJZ %s_done", name)
	g.p("%s_tail:", name)
	tail()
	g.p("\tDECQ CX")
	g.p("\tJNZ %s_tail", name)
	g.p("%s_done:", name)
}

// bcastFMAs broadcasts x[r, k] into a register (Z16+r, above the
// accumulators and below the panel registers) and multiplies it into row
// r's accumulators with the panel vectors Z<w0>, Z<w0+1>, ... One
// broadcast per row rather than an embedded broadcast in every FMA (EVEX
// {1to16}) halves the loads of the 8-row kernel, 18 to 10 per 16 FMAs: with
// two vector loads a cycle, the embedded form was load-bound on Zen 5 at
// about 88% of FMA throughput (M = 128: 115 → 143 GFLOP/s on one core, M =
// 8 at the bandwidth floor: 131 → 155 GFLOP/s).
func (g *gen) bcastFMAs(r, w0, vecs int, acc func(r, v int) string) {
	b := fmt.Sprintf("Z%d", 16+r)
	g.p("\tVBROADCASTSS %s, %s", rowAddr(r, 0, "SI", "R9", "R10", "R12"), b)
	for v := range vecs {
		g.p("\tVFMADD231PS Z%d, %s, %s", w0+v, b, acc(r, v))
	}
}

// hsum reduces the vector accumulator 0 (Z0 or Y0) into X0's low lane.
func (g *gen) hsum(avx512 bool) {
	if avx512 {
		g.p("\tVEXTRACTF64X4 $1, Z0, Y1")
		g.p("\tVADDPS Y1, Y0, Y0")
	}
	g.p("\tVEXTRACTF128 $1, Y0, X1")
	g.p("\tVADDPS X1, X0, X0")
	g.p("\tVHADDPS X0, X0, X0")
	g.p("\tVHADDPS X0, X0, X0")
}

// dot emits func name(a, b *float32, n int) float32: four accumulators of
// vector width, then one vector at a time, then scalar.
func (g *gen) dot(name string, avx512 bool) {
	reg, lanes := "Y", 8
	if avx512 {
		reg, lanes = "Z", 16
	}
	vb := lanes * 4
	zero := "VXORPS"
	if avx512 {
		zero = "VPXORD"
	}
	g.p("// func %s(a, b *float32, n int) float32", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-28", name)
	g.p("\tMOVQ a+0(FP), SI")
	g.p("\tMOVQ b+8(FP), DI")
	g.p("\tMOVQ n+16(FP), CX")
	for i := range 4 {
		g.p("\t%s %s%d, %s%d, %s%d", zero, reg, i, reg, i, reg, i)
	}
	g.p("%s_l4:", name)
	g.p("\tCMPQ CX, $%d", 4*lanes)
	g.p("\tJLT %s_l1", name)
	for i := range 4 {
		g.p("\tVMOVUPS %d(SI), %s%d", i*vb, reg, 4+i)
	}
	for i := range 4 {
		g.p("\tVFMADD231PS %d(DI), %s%d, %s%d", i*vb, reg, 4+i, reg, i)
	}
	g.p("\tADDQ $%d, SI", 4*vb)
	g.p("\tADDQ $%d, DI", 4*vb)
	g.p("\tSUBQ $%d, CX", 4*lanes)
	g.p("\tJMP %s_l4", name)
	g.p("%s_l1:", name)
	g.p("\tCMPQ CX, $%d", lanes)
	g.p("\tJLT %s_reduce", name)
	g.p("\tVMOVUPS (SI), %s4", reg)
	g.p("\tVFMADD231PS (DI), %s4, %s0", reg, reg)
	g.p("\tADDQ $%d, SI", vb)
	g.p("\tADDQ $%d, DI", vb)
	g.p("\tSUBQ $%d, CX", lanes)
	g.p("\tJMP %s_l1", name)
	g.p("%s_reduce:", name)
	g.p("\tVADDPS %s1, %s0, %s0", reg, reg, reg)
	g.p("\tVADDPS %s3, %s2, %s2", reg, reg, reg)
	g.p("\tVADDPS %s2, %s0, %s0", reg, reg, reg)
	g.hsum(avx512)
	g.p("\tTESTQ CX, CX")
	g.p("\tJZ %s_done", name)
	g.p("%s_tail:", name)
	g.p("\tVMOVSS (SI), X1")
	g.p("\tVFMADD231SS (DI), X1, X0")
	g.p("\tADDQ $4, SI")
	g.p("\tADDQ $4, DI")
	g.p("\tDECQ CX")
	g.p("\tJNZ %s_tail", name)
	g.p("%s_done:", name)
	g.p("\tVMOVSS X0, ret+24(FP)")
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

// axpy emits func name(y, x *float32, n int, a float32): y[i] += a·x[i].
// With scale set it emits func name(y *float32, n int, a float32):
// y[i] *= a instead (x unused).
func (g *gen) axpy(name string, avx512, scale bool) {
	reg, lanes := "Y", 8
	if avx512 {
		reg, lanes = "Z", 16
	}
	vb := lanes * 4
	if scale {
		g.p("// func %s(y *float32, n int, a float32)", name)
		g.p("TEXT ·%s(SB), NOSPLIT, $0-20", name)
		g.p("\tMOVQ y+0(FP), DI")
		g.p("\tMOVQ n+8(FP), CX")
		g.p("\tVBROADCASTSS a+16(FP), %s15", reg)
	} else {
		g.p("// func %s(y, x *float32, n int, a float32)", name)
		g.p("TEXT ·%s(SB), NOSPLIT, $0-28", name)
		g.p("\tMOVQ y+0(FP), DI")
		g.p("\tMOVQ x+8(FP), SI")
		g.p("\tMOVQ n+16(FP), CX")
		g.p("\tVBROADCASTSS a+24(FP), %s15", reg)
	}
	step := func(n int) {
		for i := range n {
			g.p("\tVMOVUPS %d(DI), %s%d", i*vb, reg, i)
		}
		for i := range n {
			if scale {
				g.p("\tVMULPS %s15, %s%d, %s%d", reg, reg, i, reg, i)
			} else {
				g.p("\tVFMADD231PS %d(SI), %s15, %s%d", i*vb, reg, reg, i)
			}
		}
		for i := range n {
			g.p("\tVMOVUPS %s%d, %d(DI)", reg, i, i*vb)
		}
		if !scale {
			g.p("\tADDQ $%d, SI", n*vb)
		}
		g.p("\tADDQ $%d, DI", n*vb)
		g.p("\tSUBQ $%d, CX", n*lanes)
	}
	g.elementLoop(name, lanes, step, func() {
		g.p("\tVMOVSS (DI), X0")
		if scale {
			g.p("\tVMULSS X15, X0, X0")
		} else {
			g.p("\tVFMADD231SS (SI), X15, X0")
			g.p("\tADDQ $4, SI")
		}
		g.p("\tVMOVSS X0, (DI)")
		g.p("\tADDQ $4, DI")
	})
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

// expConsts are the constants of the vector exp, in the order of the
// DATA table (each replicated to 64 bytes so that AVX-512 and AVX2 code can
// use it as a full-width memory operand). exp(x) = 2^n·p(r) with
// n = round(x·log2e) and r = x − n·ln2 split in two parts (Cody–Waite:
// ln2hi has 9 significant bits, so n·ln2hi is exact), p the degree-7
// Taylor polynomial, whose error on |r| ≤ ln2/2 is under 2⁻²⁵.
var expConsts = []struct {
	name string
	bits uint32
}{
	{"log2e", 0x3fb8aa3b}, // 1/ln 2
	{"ln2hi", 0x3f318000}, // 0.693359375
	{"ln2lo", 0xb95e8083}, // ln 2 − ln2hi
	{"hi", 0x42b00000},    // 88: 2^127 is the largest exponent the AVX2 path can add
	{"lo", 0xc2ac0000},    // −86: keeps 2^n normal
	{"one", 0x3f800000},   // c0 = c1 = 1
	{"c2", 0x3f000000},    // 1/2!
	{"c3", 0x3e2aaaab},    // 1/3!
	{"c4", 0x3d2aaaab},    // 1/4!
	{"c5", 0x3c088889},    // 1/5!
	{"c6", 0x3ab60b61},    // 1/6!
	{"c7", 0x39500d01},    // 1/7!
	{"gc", 0x3d372713},    // 0.044715, gelu_new's cubic coefficient
	{"gk2", 0xbfcc422a},   // −2·sqrt(2/π)
}

func constAddr(name string) string {
	for i, c := range expConsts {
		if c.name == name {
			return fmt.Sprintf("expc<>+%d(SB)", i*64)
		}
	}
	panic(name)
}

func (g *gen) constTable() {
	for i, c := range expConsts {
		for j := range 16 {
			g.p("DATA expc<>+%d(SB)/4, $0x%08x", i*64+j*4, c.bits)
		}
	}
	g.p("GLOBL expc<>(SB), RODATA|NOPTR, $%d", len(expConsts)*64)
	g.p("")
}

// expVec emits out = exp(t) for one vector; t and s1 are clobbered.
func (g *gen) expVec(avx512 bool, t, s1, out string) {
	c := constAddr
	g.p("\tVMINPS %s, %s, %s", c("hi"), t, t)
	g.p("\tVMAXPS %s, %s, %s", c("lo"), t, t)
	g.p("\tVMULPS %s, %s, %s", c("log2e"), t, s1)
	if avx512 {
		g.p("\tVRNDSCALEPS $0, %s, %s", s1, s1)
	} else {
		g.p("\tVROUNDPS $0, %s, %s", s1, s1)
	}
	g.p("\tVFNMADD231PS %s, %s, %s", c("ln2hi"), s1, t)
	g.p("\tVFNMADD231PS %s, %s, %s", c("ln2lo"), s1, t)
	g.p("\tVMOVUPS %s, %s", c("c7"), out)
	for _, k := range []string{"c6", "c5", "c4", "c3", "c2", "one", "one"} {
		g.p("\tVFMADD213PS %s, %s, %s", c(k), t, out)
	}
	if avx512 {
		g.p("\tVSCALEFPS %s, %s, %s", s1, out, out)
	} else {
		g.p("\tVCVTPS2DQ %s, %s", s1, s1)
		g.p("\tVPSLLD $23, %s, %s", s1, s1)
		g.p("\tVPADDD %s, %s, %s", s1, out, out)
	}
}

// expSubSum emits func name(x *float32, n int, m float32) float32:
// x[i] = exp(x[i] − m) for the whole vectors of x, returning their sum.
// The caller handles the n mod lanes tail.
func (g *gen) expSubSum(name string, avx512 bool) {
	reg, lanes := "Y", 8
	if avx512 {
		reg, lanes = "Z", 16
	}
	r := func(i int) string { return fmt.Sprintf("%s%d", reg, i) }
	g.p("// func %s(x *float32, n int, m float32) float32", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-28", name)
	g.p("\tMOVQ x+0(FP), DI")
	g.p("\tMOVQ n+8(FP), CX")
	g.p("\tVBROADCASTSS m+16(FP), %s", r(15))
	if avx512 {
		g.p("\tVPXORD Z4, Z4, Z4")
	} else {
		g.p("\tVXORPS Y4, Y4, Y4")
	}
	g.p("%s_loop:", name)
	g.p("\tCMPQ CX, $%d", lanes)
	g.p("\tJLT %s_done", name)
	g.p("\tVMOVUPS (DI), %s", r(1))
	g.p("\tVSUBPS %s, %s, %s", r(15), r(1), r(1))
	g.expVec(avx512, r(1), r(2), r(3))
	g.p("\tVMOVUPS %s, (DI)", r(3))
	g.p("\tVADDPS %s, %s, %s", r(3), r(4), r(4))
	g.p("\tADDQ $%d, DI", lanes*4)
	g.p("\tSUBQ $%d, CX", lanes)
	g.p("\tJMP %s_loop", name)
	g.p("%s_done:", name)
	if avx512 {
		g.p("\tVMOVUPS Z4, Z0")
	} else {
		g.p("\tVMOVUPS Y4, Y0")
	}
	g.hsum(avx512)
	g.p("\tVMOVSS X0, ret+24(FP)")
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

// maxVec emits func name(x *float32, n int) float32: the largest of the
// whole vectors of x, starting from −Inf. VMAXPS returns its second source
// when either is NaN, and the accumulator is that source, so a NaN in x is
// skipped exactly as the scalar "if v > m" skips it.
func (g *gen) maxVec(name string, avx512 bool) {
	reg, lanes := "Y", 8
	if avx512 {
		reg, lanes = "Z", 16
	}
	r := func(i int) string { return fmt.Sprintf("%s%d", reg, i) }
	g.p("// func %s(x *float32, n int) float32", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-20", name)
	g.p("\tMOVQ x+0(FP), DI")
	g.p("\tMOVQ n+8(FP), CX")
	g.p("\tMOVL $0xff800000, AX") // −Inf
	g.p("\tVMOVD AX, X4")
	g.p("\tVBROADCASTSS X4, %s", r(4))
	g.p("%s_loop:", name)
	g.p("\tCMPQ CX, $%d", lanes)
	g.p("\tJLT %s_done", name)
	g.p("\tVMOVUPS (DI), %s", r(1))
	g.p("\tVMAXPS %s, %s, %s", r(4), r(1), r(4)) // x > acc ? x : acc
	g.p("\tADDQ $%d, DI", lanes*4)
	g.p("\tSUBQ $%d, CX", lanes)
	g.p("\tJMP %s_loop", name)
	g.p("%s_done:", name)
	// No lane holds a NaN, so the order of the reduction does not matter.
	if avx512 {
		g.p("\tVEXTRACTF64X4 $1, Z4, Y1")
		g.p("\tVMAXPS Y1, Y4, Y4")
	}
	g.p("\tVEXTRACTF128 $1, Y4, X1")
	g.p("\tVMAXPS X1, X4, X0")
	g.p("\tVPERMILPS $0x4e, X0, X1")
	g.p("\tVMAXPS X1, X0, X0")
	g.p("\tVPERMILPS $0xb1, X0, X1")
	g.p("\tVMAXPS X1, X0, X0")
	g.p("\tVMOVSS X0, ret+16(FP)")
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

// indexVec emits func name(x *float32, n int, v float32) int: the first i
// < n with x[i] == v, or −1; n is a whole number of vectors. The compare is
// ordered (EQ_OQ), so a NaN never matches and +0 matches −0, as Go's ==.
func (g *gen) indexVec(name string, avx512 bool) {
	reg, lanes := "Y", 8
	if avx512 {
		reg, lanes = "Z", 16
	}
	g.p("// func %s(x *float32, n int, v float32) int", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-32", name)
	g.p("\tMOVQ x+0(FP), DI")
	g.p("\tMOVQ n+8(FP), CX")
	g.p("\tVBROADCASTSS v+16(FP), %s1", reg)
	g.p("\tXORQ AX, AX")
	g.p("%s_loop:", name)
	g.p("\tCMPQ AX, CX")
	g.p("\tJGE %s_none", name)
	if avx512 {
		g.p("\tVCMPPS $0, (DI)(AX*4), Z1, K1")
		g.p("\tKORTESTW K1, K1")
		g.p("\tJNZ %s_found", name)
	} else {
		g.p("\tVCMPPS $0, (DI)(AX*4), Y1, Y2")
		g.p("\tVMOVMSKPS Y2, DX")
		g.p("\tTESTL DX, DX")
		g.p("\tJNZ %s_found", name)
	}
	g.p("\tADDQ $%d, AX", lanes)
	g.p("\tJMP %s_loop", name)
	g.p("%s_found:", name)
	if avx512 {
		g.p("\tKMOVW K1, DX")
	}
	g.p("\tBSFL DX, DX") // the lowest set lane: the first match
	g.p("\tADDQ DX, AX")
	g.p("\tMOVQ AX, ret+24(FP)")
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("%s_none:", name)
	g.p("\tMOVQ $-1, ret+24(FP)")
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

// gelu emits func name(x *float32, n int): x[i] = gelu_new(x[i]) for the
// whole vectors of x, as x / (1 + exp(−2u)), u = sqrt(2/π)(x + 0.044715x³),
// which equals 0.5x(1 + tanh(u)) and needs one exp.
func (g *gen) gelu(name string, avx512 bool) {
	reg, lanes := "Y", 8
	if avx512 {
		reg, lanes = "Z", 16
	}
	r := func(i int) string { return fmt.Sprintf("%s%d", reg, i) }
	c := constAddr
	g.p("// func %s(x *float32, n int)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-16", name)
	g.p("\tMOVQ x+0(FP), DI")
	g.p("\tMOVQ n+8(FP), CX")
	g.p("%s_loop:", name)
	g.p("\tCMPQ CX, $%d", lanes)
	g.p("\tJLT %s_done", name)
	g.p("\tVMOVUPS (DI), %s", r(0))
	g.p("\tVMULPS %s, %s, %s", r(0), r(0), r(1))     // x²
	g.p("\tVMULPS %s, %s, %s", c("gc"), r(1), r(1))  // 0.044715x²
	g.p("\tVADDPS %s, %s, %s", c("one"), r(1), r(1)) // 1 + 0.044715x²
	g.p("\tVMULPS %s, %s, %s", r(0), r(1), r(1))     // x + 0.044715x³
	g.p("\tVMULPS %s, %s, %s", c("gk2"), r(1), r(1)) // −2u
	g.expVec(avx512, r(1), r(2), r(3))
	g.p("\tVADDPS %s, %s, %s", c("one"), r(3), r(3))
	g.p("\tVDIVPS %s, %s, %s", r(3), r(0), r(0))
	g.p("\tVMOVUPS %s, (DI)", r(0))
	g.p("\tADDQ $%d, DI", lanes*4)
	g.p("\tSUBQ $%d, CX", lanes)
	g.p("\tJMP %s_loop", name)
	g.p("%s_done:", name)
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

// siluMul emits func name(g, u *float32, n int): g[i] = silu(g[i])·u[i]
// for the whole vectors of g, silu(x) = x / (1 + exp(−x)): a gated MLP's
// activation, one exp per element.
func (g *gen) siluMul(name string, avx512 bool) {
	reg, lanes := "Y", 8
	if avx512 {
		reg, lanes = "Z", 16
	}
	r := func(i int) string { return fmt.Sprintf("%s%d", reg, i) }
	c := constAddr
	g.p("// func %s(gate, up *float32, n int)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-24", name)
	g.p("\tMOVQ gate+0(FP), DI")
	g.p("\tMOVQ up+8(FP), SI")
	g.p("\tMOVQ n+16(FP), CX")
	g.p("%s_loop:", name)
	g.p("\tCMPQ CX, $%d", lanes)
	g.p("\tJLT %s_done", name)
	g.p("\tVMOVUPS (DI), %s", r(0))
	if avx512 {
		g.p("\tVPXORD %s, %s, %s", r(1), r(1), r(1))
	} else {
		g.p("\tVXORPS %s, %s, %s", r(1), r(1), r(1))
	}
	g.p("\tVSUBPS %s, %s, %s", r(0), r(1), r(1)) // −x
	g.expVec(avx512, r(1), r(2), r(3))
	g.p("\tVADDPS %s, %s, %s", c("one"), r(3), r(3))
	g.p("\tVDIVPS %s, %s, %s", r(3), r(0), r(0))
	g.p("\tVMULPS (SI), %s, %s", r(0), r(0))
	g.p("\tVMOVUPS %s, (DI)", r(0))
	g.p("\tADDQ $%d, DI", lanes*4)
	g.p("\tADDQ $%d, SI", lanes*4)
	g.p("\tSUBQ $%d, CX", lanes)
	g.p("\tJMP %s_loop", name)
	g.p("%s_done:", name)
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

// axpyRows emits func name(y, a, w *float32, n, k int):
// y[0:n] += Σ_{i<k} a[i]·w[i·n : i·n+n], for n a multiple of the vector
// width: attention's weighted sum of one block of value rows, with y kept
// in registers across the block. Each y[j] takes one FMA per row, in row
// order, exactly as k calls of axpy would, so results do not depend on
// how the rows are split into calls (the KV block size).
func (g *gen) axpyRows(name string, avx512 bool) {
	reg, lanes := "Y", 8
	if avx512 {
		reg, lanes = "Z", 16
	}
	vb := lanes * 4
	r := func(i int) string { return fmt.Sprintf("%s%d", reg, i) }
	g.p("// func %s(y, a, w *float32, n, k int)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-40", name)
	g.p("\tMOVQ y+0(FP), DI")
	g.p("\tMOVQ a+8(FP), SI")
	g.p("\tMOVQ w+16(FP), DX")
	g.p("\tMOVQ n+24(FP), BX")
	g.p("\tMOVQ k+32(FP), R8")
	g.p("\tMOVQ BX, R9")
	g.p("\tSHLQ $2, R9") // row stride in bytes
	chunk := func(label string, vecs int) {
		g.p("%s_%s:", name, label)
		g.p("\tCMPQ BX, $%d", vecs*lanes)
		next := "done"
		if vecs == 4 {
			next = "c1"
		}
		g.p("\tJLT %s_%s", name, next)
		for v := range vecs {
			g.p("\tVMOVUPS %d(DI), %s", v*vb, r(v))
		}
		g.p("\tMOVQ SI, R10")
		g.p("\tMOVQ DX, R11")
		g.p("\tMOVQ R8, CX")
		g.p("\tTESTQ CX, CX")
		g.p("\tJZ %s_%s_store", name, label)
		g.p("%s_%s_k:", name, label)
		g.p("\tVBROADCASTSS (R10), %s", r(8))
		for v := range vecs {
			g.p("\tVFMADD231PS %d(R11), %s, %s", v*vb, r(8), r(v))
		}
		g.p("\tADDQ $4, R10")
		g.p("\tADDQ R9, R11")
		g.p("\tDECQ CX")
		g.p("\tJNZ %s_%s_k", name, label)
		g.p("%s_%s_store:", name, label)
		for v := range vecs {
			g.p("\tVMOVUPS %s, %d(DI)", r(v), v*vb)
		}
		g.p("\tADDQ $%d, DI", vecs*vb)
		g.p("\tADDQ $%d, DX", vecs*vb)
		g.p("\tSUBQ $%d, BX", vecs*lanes)
		g.p("\tJMP %s_%s", name, label)
	}
	chunk("c4", 4)
	chunk("c1", 1)
	g.p("%s_done:", name)
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

// dotRows emits func name(dst, q, keys *float32, rows, d int):
// dst[i] = Σ_j q[j]·keys[i·d + j] for i < rows, d a positive multiple of
// the vector width: attention's scores for one block of keys in one call.
// Keys go four at a time, sharing each load of q and one reduction tree
// that yields four sums in one vector; leftover keys go one at a time. Both
// paths give every key one accumulator, one FMA per vector of d in order,
// and the same addition tree ((s0+s1)+(s2+s3))+((s4+s5)+(s6+s7)) over its
// eight partial sums, so a score does not depend on how keys are grouped
// into calls (the GPT-2 backend's results do not depend on its KV block
// size).
func (g *gen) dotRows(name string, avx512 bool) {
	reg, lanes := "Y", 8
	zero := "VXORPS"
	if avx512 {
		reg, lanes, zero = "Z", 16, "VPXORD"
	}
	vb := lanes * 4
	r := func(i int) string { return fmt.Sprintf("%s%d", reg, i) }
	y := func(i int) string { return fmt.Sprintf("Y%d", i) }
	// fold8 leaves accumulator i as eight partial sums in Y<i>.
	fold8 := func(i int) {
		if avx512 {
			g.p("\tVEXTRACTF64X4 $1, Z%d, Y%d", i, 4+i)
			g.p("\tVADDPS Y%d, Y%d, Y%d", 4+i, i, i)
		}
	}
	g.p("// func %s(dst, q, keys *float32, rows, d int)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-40", name)
	g.p("\tMOVQ dst+0(FP), DI")
	g.p("\tMOVQ q+8(FP), SI")
	g.p("\tMOVQ keys+16(FP), DX")
	g.p("\tMOVQ rows+24(FP), R8")
	g.p("\tMOVQ d+32(FP), BX")
	g.p("\tMOVQ BX, R11")
	g.p("\tSHLQ $2, R11") // key row bytes
	g.p("%s_r4:", name)
	g.p("\tCMPQ R8, $4")
	g.p("\tJLT %s_r1", name)
	for i := range 4 {
		g.p("\t%s %s, %s, %s", zero, r(i), r(i), r(i))
	}
	g.p("\tLEAQ (DX)(R11*1), R10")
	g.p("\tLEAQ (DX)(R11*2), R12")
	g.p("\tLEAQ (R10)(R11*2), R13")
	g.p("\tXORQ AX, AX") // byte offset within the rows
	g.p("\tMOVQ BX, CX")
	g.p("%s_r4_d:", name)
	g.p("\tVMOVUPS (SI)(AX*1), %s", r(8))
	for i, base := range []string{"DX", "R10", "R12", "R13"} {
		g.p("\tVFMADD231PS (%s)(AX*1), %s, %s", base, r(8), r(i))
	}
	g.p("\tADDQ $%d, AX", vb)
	g.p("\tSUBQ $%d, CX", lanes)
	g.p("\tJNZ %s_r4_d", name)
	for i := range 4 {
		fold8(i)
	}
	g.p("\tVHADDPS %s, %s, %s", y(1), y(0), y(0))
	g.p("\tVHADDPS %s, %s, %s", y(3), y(2), y(2))
	g.p("\tVHADDPS %s, %s, %s", y(2), y(0), y(0))
	g.p("\tVEXTRACTF128 $1, Y0, X1")
	g.p("\tVADDPS X1, X0, X0")
	g.p("\tVMOVUPS X0, (DI)")
	g.p("\tADDQ $16, DI")
	g.p("\tLEAQ (DX)(R11*4), DX")
	g.p("\tSUBQ $4, R8")
	g.p("\tJMP %s_r4", name)
	g.p("%s_r1:", name)
	g.p("\tTESTQ R8, R8")
	g.p("\tJZ %s_done", name)
	g.p("\t%s %s, %s, %s", zero, r(0), r(0), r(0))
	g.p("\tXORQ AX, AX")
	g.p("\tMOVQ BX, CX")
	g.p("%s_r1_d:", name)
	g.p("\tVMOVUPS (SI)(AX*1), %s", r(8))
	g.p("\tVFMADD231PS (DX)(AX*1), %s, %s", r(8), r(0))
	g.p("\tADDQ $%d, AX", vb)
	g.p("\tSUBQ $%d, CX", lanes)
	g.p("\tJNZ %s_r1_d", name)
	fold8(0)
	g.p("\tVHADDPS Y0, Y0, Y0")
	g.p("\tVHADDPS Y0, Y0, Y0")
	g.p("\tVEXTRACTF128 $1, Y0, X1")
	g.p("\tVADDPS X1, X0, X0")
	g.p("\tVMOVSS X0, (DI)")
	g.p("\tADDQ $4, DI")
	g.p("\tADDQ R11, DX")
	g.p("\tDECQ R8")
	g.p("\tJMP %s_r1", name)
	g.p("%s_done:", name)
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}
