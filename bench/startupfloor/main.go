// Command startupfloor is the baseline of the bench row startup/deps-floor
// (BENCHMARKS.md, "Start-up"): a program that links the two dependencies of
// the amduat command whose package initialisation every command pays and
// this module cannot defer, and does nothing else. Pebble, the embedded
// store, imports the Prometheus client (with procfs, protobuf and a YAML
// library) and cockroachdb/errors (with sentry-go); minio-go, the S3
// backend's client, builds regular expressions and tables at init. Go runs
// the init of every linked package before main, so no amduat command can
// start in less time than this program, whatever it defers itself.
package main

import (
	"fmt"

	_ "github.com/cockroachdb/pebble/v2"
	_ "github.com/minio/minio-go/v7"
)

func main() { fmt.Println("hello, world") }
