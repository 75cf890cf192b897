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
