package scenes

// rng is a splitmix64 generator. The scene generator uses its own generator,
// not math/rand, so that a seed gives the same scenes on every Go version:
// the training data, the embedded model and the evaluation depend on it.
type rng struct{ s uint64 }

// mix64 is the splitmix64 finaliser; it hashes one 64-bit value.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// hash2 hashes two values into one.
func hash2(a, b uint64) uint64 { return mix64(a*0x9e3779b97f4a7c15 ^ mix64(b+0x632be59bd9b4e019)) }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	return mix64(r.s)
}

// float returns a value in [0, 1).
func (r *rng) float() float64 { return float64(r.next()>>11) / (1 << 53) }

// uniform returns a value in [lo, hi).
func (r *rng) uniform(lo, hi float64) float64 { return lo + (hi-lo)*r.float() }

// intn returns a value in [0, n); n > 0.
func (r *rng) intn(n int) int { return int((r.next() >> 11) % uint64(n)) }

// perm returns a permutation of [0, n).
func (r *rng) perm(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	for i := n - 1; i > 0; i-- {
		j := r.intn(i + 1)
		p[i], p[j] = p[j], p[i]
	}
	return p
}
