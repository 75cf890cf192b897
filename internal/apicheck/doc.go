// Package apicheck pins the module's public API: its test compares
// go doc -all of every public package (not internal, not a command) with a
// golden file in testdata, one per package. After a deliberate API change,
// rewrite the goldens with
//
//	go test ./internal/apicheck -update
//
// and review their diff with the change.
package apicheck
