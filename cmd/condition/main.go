// Command condition conditions image features on text prompts, and text on
// images, with cross-attention. See README.md.
package main

import "os"

func main() { os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
