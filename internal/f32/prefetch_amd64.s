//go:build amd64 && !purego

#include "textflag.h"

// func prefetchT1(p *float32, lines int)
TEXT ·prefetchT1(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	MOVQ lines+8(FP), CX
	TESTQ CX, CX
	JLE t1_done
t1_loop:
	PREFETCHT1 (SI)
	ADDQ $64, SI
	DECQ CX
	JNZ t1_loop
t1_done:
	RET
