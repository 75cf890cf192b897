// Package logit turns a SigLIP logit into its probability.
package logit

import "math"

// Sigmoid is 1/(1+e^-x), SigLIP's probability of a logit.
func Sigmoid(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	z := math.Exp(x)
	return z / (1 + z)
}
