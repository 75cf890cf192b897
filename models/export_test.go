package models

import "testing"

// SetLinkFile replaces, until the test ends, the function that makes hard
// links in the derived cache, so that a test can see the copy taken where
// links cannot be made.
func SetLinkFile(t testing.TB, link func(oldname, newname string) error) {
	old := linkFile
	linkFile = link
	t.Cleanup(func() { linkFile = old })
}
