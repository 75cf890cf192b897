package pipeline

import (
	"math"
	"math/rand/v2"
	"testing"
)

// similarityGeneric is similarity one dot product at a time: the reference.
func similarityGeneric(tokens, patches []float32, t, p int) []float32 {
	d := len(tokens) / t
	out := make([]float32, t*p)
	for i := range t {
		ti := tokens[i*d : (i+1)*d]
		for j := range p {
			pj := patches[j*d : (j+1)*d]
			var s float32
			for k, v := range ti {
				s += v * pj[k]
			}
			out[i*p+j] = s
		}
	}
	return out
}

// TestSimilarityBits: similarity gives the bits of similarityGeneric for
// every count of tokens and patches around its blocks of two and four.
func TestSimilarityBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, d := range []int{1, 3, 16, 512} {
		for nt := 1; nt <= 5; nt++ {
			for np := 1; np <= 13; np++ {
				tokens, patches := make([]float32, nt*d), make([]float32, np*d)
				for i := range tokens {
					tokens[i] = float32(rng.NormFloat64())
				}
				for i := range patches {
					patches[i] = float32(rng.NormFloat64())
				}
				got, want := similarity(tokens, patches, nt, np), similarityGeneric(tokens, patches, nt, np)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("d %d, %d tokens, %d patches: value %d is %v, the reference's %v", d, nt, np, i, got[i], want[i])
					}
				}
			}
		}
	}
}

func BenchmarkSimilarity(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	const nt, np, d = 5, 49, 512
	tokens, patches := make([]float32, nt*d), make([]float32, np*d)
	for i := range tokens {
		tokens[i] = float32(rng.NormFloat64())
	}
	for i := range patches {
		patches[i] = float32(rng.NormFloat64())
	}
	b.Run("blocked", func(b *testing.B) {
		for b.Loop() {
			similarity(tokens, patches, nt, np)
		}
	})
	b.Run("generic", func(b *testing.B) {
		for b.Loop() {
			similarityGeneric(tokens, patches, nt, np)
		}
	})
}
