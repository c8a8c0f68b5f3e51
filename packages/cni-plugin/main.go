package main

import "os"

func main() {
	os.Exit(run(call{env: os.Getenv, stdin: os.Stdin, stdout: os.Stdout}))
}
