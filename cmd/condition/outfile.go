package main

import (
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
