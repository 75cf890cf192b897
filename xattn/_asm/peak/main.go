// Command peak generates the FMA-throughput loops of package
// xattn/internal/cpuid: register-only loops of independent VFMADD231PS
// chains on ymm (AVX2+FMA) and zmm (AVX-512) registers, which measure the
// machine's peak float32 FMA rate.
//
// Run it through the //go:generate line in xattn/internal/cpuid/cpuid.go.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// rounds is how many times each accumulator is updated per loop iteration.
const rounds = 4

func main() {
	ConstraintExpr("amd64,gc,!purego")
	loop("peakAVX2", "ymm", []VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11}, Y12, Y13,
		func(r Op) { VXORPS(r, r, r) })
	loop("peakAVX512", "zmm", []VecPhysical{Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11,
		Z12, Z13, Z14, Z15, Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23}, Z24, Z25,
		func(r Op) { VPXORD(r, r, r) })
	Generate()
}

// loop emits name(n int), which runs n iterations of rounds·len(acc)
// independent-chain FMAs on registers only.
func loop(name, kind string, acc []VecPhysical, x, y VecPhysical, zero func(Op)) {
	TEXT(name, NOSPLIT, "func(n int)")
	Doc(
		fmt.Sprintf("%s runs n iterations of %d VFMADD231PS on %s registers, in %d", name, rounds*len(acc), kind, len(acc)),
		"independent dependency chains, touching no memory.",
	)
	n := Load(Param("n"), RCX)
	for _, r := range acc {
		zero(r)
	}
	zero(x)
	zero(y)
	Label(name + "_loop")
	TESTQ(n, n)
	JEQ(LabelRef(name + "_done"))
	for i := 0; i < rounds; i++ {
		for _, r := range acc {
			VFMADD231PS(x, y, r)
		}
	}
	DECQ(n)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}
