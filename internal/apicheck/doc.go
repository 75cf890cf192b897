// Package apicheck pins the module's public API and its layers.
//
// Its API test compares go doc -all of every public package (not internal,
// not a command) with a golden file in testdata, one per package. After a
// deliberate API change, rewrite the goldens with
//
//	go test ./internal/apicheck -update
//
// and review their diff with the change.
//
// Its layering test (layers_test.go) holds the design's import directions
// as data — cmd → pipeline/serve, pipeline/batch → pipeline/index →
// pipeline → models, text, vision, xattn, tensorio → internal, the ground
// floor, which imports nothing above it and holds no main package — and
// checks every package of the module and its tests against them with go
// list, naming the importing package, the imported one and the rule.
package apicheck
