package main

// Version is the program version, written into output metadata.
var Version = "0.1.0-dev"
