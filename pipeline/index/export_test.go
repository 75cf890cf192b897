package index

import "time"

// SetCollectionRowsFresh sets how long a collection's object count is
// taken as read, and returns what restores it.
func SetCollectionRowsFresh(d time.Duration) (restore func()) {
	old := collectionRowsFresh
	collectionRowsFresh = d
	return func() { collectionRowsFresh = old }
}

// SetSegmentPage sets how many frames of a video one read of a
// collection returns, and returns what restores it.
func SetSegmentPage(n int) (restore func()) {
	old := segmentPage
	segmentPage = n
	return func() { segmentPage = old }
}
