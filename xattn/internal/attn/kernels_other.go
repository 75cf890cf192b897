//go:build !(amd64 && gc && !purego)

package attn

func attend(o []float32, ldo int, q []float32, ldq, tiles int, kp, vp []float32, n, hd int, scale float32, s, prob []float32, ldp int, ml []float32) {
	AttendGeneric(o, ldo, q, ldq, tiles, kp, vp, n, hd, scale, s, prob, ldp, ml)
}

func rowMax(x []float32) float32 { return MaxGeneric(x) }

func expSum(x []float32, sub float32) float32 { return ExpSumGeneric(x, sub) }

func geluTanh(x []float32) { GeluTanhGeneric(x) }
