package main

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conditionhq/condition/internal/orttest"
)

// TestServeLifecycle starts `condition serve` on a free loopback port,
// waits for /readyz, sends SIGTERM and expects a clean exit 0.
func TestServeLifecycle(t *testing.T) {
	orttest.Load(t)
	cmd := program("serve", "--addr", "127.0.0.1:0", "--grace", "5s")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// The address is on the line "condition serve: model default on http://ADDR/".
	sc := bufio.NewScanner(stderr)
	url := ""
	for sc.Scan() {
		if _, after, ok := strings.Cut(sc.Text(), " on http://"); ok && strings.HasPrefix(sc.Text(), "condition serve:") {
			url = "http://" + strings.TrimSuffix(after, "/")
			break
		}
	}
	if url == "" {
		t.Fatal("the server never said where it listens")
	}
	go io.Copy(io.Discard, stderr)
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, err := http.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("after SIGTERM: %v, want exit 0", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("still running 15 s after SIGTERM")
	}
}

// TestServeRefusesPublicWithoutToken: a non-loopback address needs a
// token or --allow-public.
func TestServeRefusesPublicWithoutToken(t *testing.T) {
	t.Setenv(tokenEnv, "")
	code, _, errs := runCLI(t, "serve", "--addr", "0.0.0.0:0")
	if code != exitUsage || !strings.Contains(errs, "--token") || !strings.Contains(errs, "--allow-public") {
		t.Errorf("exit %d\n%s", code, errs)
	}
}
