// Package vectors embeds the conformance vector files of this directory
// (SPECS.md §7), so that `amduat conformance run` works from any directory
// and from an installed binary. The files are data; the checks live in
// package conformance.
package vectors

import (
	"embed"
	"io/fs"
)

//go:embed *.json
var files embed.FS

// FS returns the embedded vector files; they sit at the top of the FS.
func FS() fs.FS { return files }
