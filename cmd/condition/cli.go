package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
)

// Exit codes, as the README lists them.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitInterrupted = 130
)

// env is what every command gets: its streams, a logger on stderr, and the
// arguments left after the command name.
type env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Log    *slog.Logger
}

// command is one subcommand. run parses its own flags from args (use
// newFlagSet) and returns an error; it never exits.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, e *env, args []string) error
}

var commands = map[string]command{}

// register adds a command; each command's file calls it from init.
func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("condition: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

// usageError marks an error as a usage error (exit code 2).
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// usagef returns a usage error (exit code 2).
func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// exitError carries a chosen exit code (for example 1 after a job that went
// on past failures) with a message that was already reported.
type exitError struct {
	code int
	msg  string
}

func (x exitError) Error() string { return x.msg }

// newFlagSet returns a flag set for a subcommand that reports parse errors
// as usage errors instead of exiting. Its help (-h, --help) goes to stdout,
// as asked for, and parseFlags ends the command with exit code 0.
func newFlagSet(e *env, name, usage string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	fs.SortFlags = false
	fs.Usage = func() {
		fmt.Fprintf(e.Stdout, "usage: condition %s\n\nflags:\n%s", usage, fs.FlagUsages())
	}
	return fs
}

// parseFlags parses args, mapping errors (and -h) to usage errors.
func parseFlags(fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return errHelp
		}
		return usageError{err}
	}
	return nil
}

var errHelp = errors.New("help requested")

// Main runs the program and returns its exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return mainContext(ctx, args, stdin, stdout, stderr)
}

func mainContext(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{Stdin: stdin, Stdout: stdout, Stderr: stderr,
		Log: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: logLevel()}))}
	if len(args) == 0 {
		printUsage(stderr)
		return exitUsage
	}
	if args[0] == "help" && len(args) == 2 {
		if _, ok := commands[args[1]]; ok {
			args = []string{args[1], "--help"} // condition help run = condition run --help
		}
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printUsage(stdout)
		return exitOK
	}
	if args[0] == "version" || args[0] == "--version" {
		fmt.Fprintln(stdout, "condition", Version)
		return exitOK
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "condition: unknown command %q\n\n", args[0])
		printUsage(stderr)
		return exitUsage
	}
	err := c.run(ctx, e, args[1:])
	return exitCode(stderr, c.name, err)
}

// exitCode maps an error to an exit code in one place, printing it.
func exitCode(stderr io.Writer, name string, err error) int {
	var ue usageError
	var xe exitError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errHelp):
		return exitOK
	case errors.Is(err, context.Canceled):
		fmt.Fprintf(stderr, "condition %s: interrupted\n", name)
		return exitInterrupted
	case errors.As(err, &xe):
		if xe.msg != "" {
			fmt.Fprintf(stderr, "condition %s: %s\n", name, xe.msg)
		}
		return xe.code
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "condition %s: %v\n(run 'condition %s --help' for usage)\n", name, err, name)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "condition %s: %v\n", name, err)
		return exitFailed
	}
}

func printUsage(w io.Writer) {
	fmt.Fprintf(w, "condition %s: cross-attention between CLIP image patches and prompt tokens\n\nusage: condition <command> [flags]\n\ncommands:\n", Version)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-11s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(w, "\nrun 'condition <command> --help' for a command's flags\n")
}

func logLevel() slog.Level {
	switch strings.ToLower(os.Getenv("CONDITION_LOG")) {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}
