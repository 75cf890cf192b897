package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// outFormat returns the extension (lowercase, with its dot) of the file a
// flag names, when it is one of the formats the command writes; otherwise
// a usage error naming them. An empty path is no error ("").
func outFormat(flag, path string, formats ...string) (string, error) {
	if path == "" {
		return "", nil
	}
	ext := strings.ToLower(filepath.Ext(path))
	if !slices.Contains(formats, ext) {
		return "", usagef("%s %s: the file's extension names the format written; want %s", flag, path, strings.Join(formats, " or "))
	}
	return ext, nil
}

// checkFiles returns a usage error naming the first of paths that does not
// exist (a mistyped input, found before any work); other errors are left to
// the reading.
func checkFiles(paths ...string) error {
	for _, p := range paths {
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			return usagef("%s: no such file", p)
		}
	}
	return nil
}

// checkInputNames returns a usage error when two of a job's local inputs
// (files, folders, tar shards) would write under the same name: with several
// inputs each is named in the output by its last name (a shard without
// .tar), so /a/x.png and /b/x.png would both write x.png.safetensors.
func checkInputNames(inputs []string) error {
	if len(inputs) < 2 {
		return nil
	}
	seen := map[string]string{}
	for _, in := range inputs {
		fi, err := os.Stat(in)
		if err != nil {
			continue // a URL, a brace pattern or a missing input: the job says
		}
		name := filepath.Base(filepath.Clean(in))
		if !fi.IsDir() && strings.EqualFold(filepath.Ext(name), ".tar") {
			name = strings.TrimSuffix(name, filepath.Ext(name))
		}
		if first, dup := seen[name]; dup {
			return usagef("--images %s and %s would both write under %q in the output (with several inputs each is named by its last name): rename one, or run them as separate jobs", first, in, name)
		}
		seen[name] = in
	}
	return nil
}
