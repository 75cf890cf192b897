package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// Exit codes, those of condition: done (also after --help), failed, a
// mistake in the command line, interrupted.
const (
	exitOK, exitFailed, exitUsage = 0, 1, 2
	exitInterrupted               = 130
)

// env is where a subcommand writes: results to Stdout, the log (Log) to
// Stderr.
type env struct {
	Stdout, Stderr io.Writer
	Log            *slog.Logger
}

// subcommand is one benchmark: run parses its own flags from args and
// returns an error, never exits.
type subcommand struct {
	name, summary string
	run           func(ctx context.Context, e *env, args []string) error
}

// subcommands are the benchmarks by name; each file adds its own from
// init.
var subcommands = map[string]subcommand{}

func addSubcommand(s subcommand) { subcommands[s.name] = s }

func subcommandNames() []string { return slices.Sorted(maps.Keys(subcommands)) }

// usageError is a mistake in the command line (exit code 2).
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// errHelp ends a subcommand whose help was asked for (exit code 0).
var errHelp = errors.New("help requested")

// newFlagSet returns the flag set of a subcommand: parse errors go to
// stderr, the help (usage line and flags) to stdout.
func newFlagSet(e *env, name, usage string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	fs.SortFlags = false
	fs.Usage = func() { fmt.Fprintf(e.Stdout, "usage: condition-bench %s\n\nflags:\n%s", usage, fs.FlagUsages()) }
	return fs
}

// parseFlags parses args into fs: help is errHelp, a mistake a usage error.
func parseFlags(fs *pflag.FlagSet, args []string) error {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		return errHelp
	case err != nil:
		return usageError{err}
	}
	return nil
}

func printUsage(w io.Writer) {
	names := subcommandNames()
	fmt.Fprintf(w, "condition-bench: benchmarks of condition's kernels, pipeline and service\n\nusage: condition-bench <%s> [flags]\n\nsubcommands:\n", strings.Join(names, "|"))
	for _, n := range names {
		fmt.Fprintf(w, "  %-9s %s\n", n, subcommands[n].summary)
	}
	fmt.Fprintln(w, "\nrun 'condition-bench <subcommand> --help' for its flags")
}

// Main runs the program on args and returns its exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printUsage(stderr)
		return exitUsage
	}
	name := args[0]
	if name == "-h" || name == "--help" || name == "help" {
		printUsage(stdout)
		return exitOK
	}
	s, ok := subcommands[name]
	if !ok {
		fmt.Fprintf(stderr, "condition-bench: unknown subcommand %q\n\n", name)
		printUsage(stderr)
		return exitUsage
	}
	level := slog.LevelInfo
	_ = level.UnmarshalText([]byte(os.Getenv("CONDITION_LOG"))) // debug, warn, error; info otherwise
	e := &env{Stdout: stdout, Stderr: stderr, Log: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))}
	err := s.run(ctx, e, args[1:])
	var ue usageError
	switch {
	case err == nil || errors.Is(err, errHelp):
		return exitOK
	case errors.Is(err, context.Canceled):
		fmt.Fprintf(stderr, "condition-bench %s: interrupted\n", name)
		return exitInterrupted
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "condition-bench %s: %v\n(run 'condition-bench %s --help' for usage)\n", name, err, name)
		return exitUsage
	}
	fmt.Fprintf(stderr, "condition-bench %s: %v\n", name, err)
	return exitFailed
}
