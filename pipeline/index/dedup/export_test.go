package dedup

// SetNearestSample sets the most images whose nearest cosines are all
// kept and the sample taken above it, for a test; it returns a function
// that restores them.
func SetNearestSample(exactMax, sample int) (restore func()) {
	m, s := exactNearestMax, nearestSample
	exactNearestMax, nearestSample = exactMax, sample
	return func() { exactNearestMax, nearestSample = m, s }
}
