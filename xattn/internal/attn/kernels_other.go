//go:build !(amd64 && gc && !purego)

package attn

func scores(s []float32, lds int, q, kp []float32, np, hd int) { ScoresGeneric(s, lds, q, kp, np, hd) }

func pv(o, p []float32, ldp int, v []float32, n, hp int) { PVGeneric(o, p, ldp, v, n, hp) }

func rowMax(x []float32) float32 { return MaxGeneric(x) }

func expSum(x []float32, sub float32) float32 { return ExpSumGeneric(x, sub) }
