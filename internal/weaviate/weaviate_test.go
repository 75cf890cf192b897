package weaviate

import (
	"strings"
	"testing"
)

// TestID: ids are RFC 9562 UUIDv5 in the package's namespace, as Python's
// uuid.uuid5 computes them (the goldens: uuid.uuid5(uuid.UUID(bytes=
// namespace), name)).
func TestID(t *testing.T) {
	for name, want := range map[string]string{
		"/data/photos/a.jpg\x00":                     "110154f8-2ca3-5b74-87f0-1100627f50e5",
		"s3://bucket/shard-000001.tar\x00000123.jpg": "889bdf2e-883b-5763-826b-b62ef73fb965",
		"": "71b43aa5-c4a5-5971-94b9-a72b652998cb",
	} {
		if got := ID(name); got != want {
			t.Errorf("ID(%q) = %s, want %s", name, got, want)
		}
	}
}

// TestParse: a collection's address parses into its host and class name;
// every other form is refused with what was expected.
func TestParse(t *testing.T) {
	got, err := Parse("weaviate://db1:8080/Photos_2")
	if err != nil || got.Host != "db1:8080" || got.Collection != "Photos_2" || got.String() != "weaviate://db1:8080/Photos_2" {
		t.Fatalf("Parse: %+v, %v", got, err)
	}
	for bad, want := range map[string]string{
		"http://db1:8080/Photos":              "want weaviate://",
		"weaviate://db1/Photos":               "host and port",
		"weaviate://db1:http/Photos":          "port",
		"weaviate://db1:8080/photos":          "class name",
		"weaviate://db1:8080/":                "class name",
		"weaviate://db1:8080/Pho-tos":         "class name",
		"weaviate://db1:8080/Photos?x=1":      "nothing more",
		"weaviate://user:key@db1:8080/Photos": "API key",
	} {
		if _, err := Parse(bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q): %v; want an error saying %q", bad, err, want)
		}
	}
}

// TestErrorMessage: Weaviate's error answers give their own words.
func TestErrorMessage(t *testing.T) {
	for body, want := range map[string]string{
		`{"error":[{"message":"class already exists"}]}`: "class already exists",
		`{"code":401,"message":"unauthorized"}`:          "unauthorized",
		`not json`:                                       "not json",
	} {
		if got := errorMessage([]byte(body)); got != want {
			t.Errorf("errorMessage(%s) = %q, want %q", body, got, want)
		}
	}
	e := &StatusError{Method: "GET", Path: "/v1/schema", Status: 401, Message: "invalid api key"}
	if !strings.Contains(e.Error(), "WEAVIATE_API_KEY") || !strings.Contains(e.Error(), "invalid api key") {
		t.Errorf("a 401: %v", e)
	}
}
