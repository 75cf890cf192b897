package dedup_test

import (
	"fmt"
	"os"
	"testing"
)

// tmpRoot is a folder for what several tests of one run share (the
// planted index), removed when they end.
var tmpRoot string

func TestMain(m *testing.M) {
	var err error
	if tmpRoot, err = os.MkdirTemp("", "dedup-test-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(tmpRoot)
	os.Exit(code)
}
