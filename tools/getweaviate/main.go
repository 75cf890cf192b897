// Command getweaviate builds the Weaviate server the vector-database tests
// run into the user cache folder, when it is not there yet, and prints its
// path.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/conditionhq/condition/internal/weaviatetest"
)

func main() {
	p, err := weaviatetest.Binary(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(p)
}
