// Command condition-bench measures condition's speed and memory: the
// cross-attention kernels, the pipeline on a folder of images, the HTTP
// service under load and ONNX graphs side by side. Run it without
// arguments for its subcommands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
