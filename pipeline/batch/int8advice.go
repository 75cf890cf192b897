package batch

import "fmt"

// int8AdviceAt is the count of images at which a float32 job on a CPU
// with VNNI says what --precision int8 would change.
var int8AdviceAt = 300

// adviseInt8 logs, for a float32 job on a CPU with VNNI, how much faster
// the int8 variant runs the vision graph and how close its outputs stay,
// from the check made with the variant when the cache holds it.
func (j *job) adviseInt8() {
	o, ok := j.eng.Int8Outlook()
	if !ok {
		return
	}
	if !o.Made {
		j.log.Info("this CPU multiplies 8-bit weights with VNNI: precision int8 runs the encoders' weight products in 8 bits, faster than float32;" +
			" its graphs are made once, checked against float32 (the check logs the cosines and both graphs' times) and kept in this program's cache")
		return
	}
	j.log.Info(fmt.Sprintf("this CPU multiplies 8-bit weights with VNNI: precision int8 ran the vision graph %.2f× as fast as float32 in the check made with its int8 graphs, whose outputs stay within cosine %.5f of float32's", o.VisionSpeedup, o.MinCosine),
		"float32_ms", o.VisionMs[0], "int8_ms", o.VisionMs[1], "probes", o.Probes, "min_cosine", o.MinCosine)
}
