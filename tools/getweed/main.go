// Command getweed builds the SeaweedFS server the object-store tests run
// into the user cache folder, when it is not there yet, and prints its path.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/conditionhq/condition/internal/s3test"
)

func main() {
	p, err := s3test.Binary(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(p)
}
