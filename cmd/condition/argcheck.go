package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/conditionhq/condition/pipeline/batch"
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

// checkWritableDir returns a usage error, before any work, when the folder
// dir (given by flag; made with its parents if missing) cannot be written:
// it names the folder that stops it (dir, or the nearest existing folder
// above it) and why. It writes and removes one empty file there. An
// object-store URL is left to the job.
func checkWritableDir(flag, dir string) error {
	return checkWritable(flag, dir, dir, true)
}

// checkWritableFile is checkWritableDir for the folder of the file path,
// which must exist (the file is written into it, not made).
func checkWritableFile(flag, path string) error {
	return checkWritable(flag, path, filepath.Dir(path), false)
}

func checkWritable(flag, given, dir string, made bool) error {
	if batch.IsStoreURL(given) {
		return nil
	}
	at := filepath.Clean(dir)
	for {
		fi, err := os.Stat(at)
		if err == nil && !fi.IsDir() {
			return usagef("%s %s: %s is a file, not a folder", flag, given, at)
		}
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return usagef("%s %s: folder %s: %v", flag, given, at, unwrapPath(err))
		}
		if !made && errors.Is(err, fs.ErrNotExist) {
			return usagef("%s %s: no folder %s (the file is written into an existing folder)", flag, given, at)
		}
		up := filepath.Dir(at)
		if up == at {
			return nil // nothing exists up to the root: the write says
		}
		at = up
	}
	f, err := os.CreateTemp(at, ".condition-write-check-*")
	if err != nil {
		return usagef("%s %s: folder %s cannot be written: %v", flag, given, at, unwrapPath(err))
	}
	name := f.Name()
	f.Close()
	os.Remove(name)
	return nil
}

// unwrapPath returns the cause of a *fs.PathError (such as "permission
// denied"), whose path the caller names itself.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// checkFiles returns a usage error naming the first of paths that does not
// exist (a mistyped input, found before any work); other errors are left to
// the reading.
func checkFiles(paths ...string) error {
	for _, p := range paths {
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			return usagef("%s: no such file", shown(p))
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
