package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
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

// command is one node of the command tree (commands): a command that runs
// (run parses its own flags from args, with newFlagSet, and returns an
// error; it never exits), a group of subcommands, or both (a run given no
// subcommand's name).
type command struct {
	name    string
	summary string
	usage   string // a group's help, after its list of subcommands
	run     func(ctx context.Context, e *env, args []string) error
	subs    []*command
}

// sub returns c's subcommand called name, or nil.
func (c *command) sub(name string) *command {
	for _, s := range c.subs {
		if s.name == name {
			return s
		}
	}
	return nil
}

// find walks args down the tree from c: the deepest command named, its
// path ("models optimize") and the arguments left.
func (c *command) find(args []string) (*command, string, []string) {
	path := ""
	for len(args) > 0 {
		s := c.sub(args[0])
		if s == nil {
			break
		}
		c, args = s, args[1:]
		path = strings.TrimSpace(path + " " + c.name)
	}
	return c, path, args
}

// printUsage lists c's subcommands on w.
func (c *command) printUsage(w io.Writer, path string) {
	if path == "" {
		fmt.Fprintf(w, "condition %s: cross-attention between CLIP image patches and prompt tokens\n\nusage: condition <command> [flags]\n\ncommands:\n", Version)
	} else {
		fmt.Fprintf(w, "usage: condition %s <%s> [flags]\n\n%s\n\nsubcommands:\n", path, strings.Join(c.subNames(), "|"), c.summary)
	}
	for _, s := range c.subs {
		fmt.Fprintf(w, "  %-11s %s\n", s.name, s.summary)
	}
	if c.usage != "" {
		fmt.Fprintf(w, "\n%s\n", c.usage)
	}
	if path == "" {
		fmt.Fprintf(w, "\nrun 'condition <command> --help' for its flags\n")
	} else {
		fmt.Fprintf(w, "\nrun 'condition %s <subcommand> --help' for its flags\n", path)
	}
}

// subNames returns the names of c's subcommands.
func (c *command) subNames() []string {
	names := make([]string, len(c.subs))
	for i, s := range c.subs {
		names[i] = s.name
	}
	return names
}

// usageError marks an error as a usage error (exit code 2).
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// usagef returns a usage error (exit code 2).
func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// quotePrompt quotes a prompt for a message: the whole of a short one, the
// start of a long one.
func quotePrompt(s string) string {
	const most = 60
	if r := []rune(s); len(r) > most {
		return fmt.Sprintf("%q… (%d characters)", string(r[:most]), len(r))
	}
	return fmt.Sprintf("%q", s)
}

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
	if flagSetMade != nil {
		flagSetMade(fs)
	}
	fs.SetOutput(e.Stderr)
	fs.SortFlags = false
	fs.Usage = func() {
		fmt.Fprintf(e.Stdout, "usage: condition %s\n\nflags:\n%s", usage, fs.FlagUsages())
	}
	return fs
}

// flagSetMade, when not nil, is given each flag set newFlagSet makes (the
// flags table of docs/commands.md is made from them).
var flagSetMade func(*pflag.FlagSet)

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
		commands.printUsage(stderr, "")
		return exitUsage
	}
	if args[0] == "version" || args[0] == "--version" {
		fmt.Fprintln(stdout, "condition", Version)
		return exitOK
	}
	if args[0] == "help" {
		// condition help models optimize = condition models optimize --help
		if c, _, rest := commands.find(args[1:]); c == commands || len(rest) > 0 {
			if len(args) > 1 {
				fmt.Fprintf(stderr, "condition: unknown command %q\n\n", strings.Join(args[1:], " "))
				commands.printUsage(stderr, "")
				return exitUsage
			}
		} else {
			args = append(args[1:], "--help")
		}
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		commands.printUsage(stdout, "")
		return exitOK
	}
	c, path, rest := commands.find(args)
	if c == commands {
		fmt.Fprintf(stderr, "condition: unknown command %q\n\n", args[0])
		commands.printUsage(stderr, "")
		return exitUsage
	}
	if c.run == nil {
		if len(rest) > 0 && (rest[0] == "-h" || rest[0] == "--help") {
			c.printUsage(stdout, path)
			return exitOK
		}
		c.printUsage(stderr, path)
		if len(rest) > 0 {
			return exitCode(stderr, path, usagef("unknown subcommand %q (%s)", rest[0], strings.Join(c.subNames(), ", ")))
		}
		return exitCode(stderr, path, usagef("%s needs a subcommand: %s", path, strings.Join(c.subNames(), ", ")))
	}
	return exitCode(stderr, path, c.run(ctx, e, rest), rest...)
}

// exitCode maps an error to an exit code in one place, printing it with
// the names in it shown safely (shownMessage, given the command's args).
func exitCode(stderr io.Writer, name string, err error, args ...string) int {
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
			fmt.Fprintf(stderr, "condition %s: %s\n", name, shownMessage(xe.msg, args))
		}
		return xe.code
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "condition %s: %s\n(run 'condition %s --help' for usage)\n", name, shownMessage(err.Error(), args), name)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "condition %s: %s\n", name, shownMessage(err.Error(), args))
		return exitFailed
	}
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
