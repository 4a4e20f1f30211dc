package main

import (
	"runtime"
	"runtime/debug"
	"sync"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/conformance"
)

func init() { addCommand(newVersionCmd) }

type versionResult struct {
	Version       string `json:"version"`
	Go            string `json:"go"`
	VectorsFormat string `json:"vectors_format"`
}

func newVersionCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of amduat",
		Args:  rangeArgs(0, 0),
		RunE: func(*cobra.Command, []string) error {
			res := versionResult{Version: moduleVersion(), Go: runtime.Version(), VectorsFormat: conformance.Format}
			if a.jsonOut {
				return a.printJSON(res)
			}
			a.printf("amduat %s (%s, vectors %s)\n", res.Version, res.Go, res.VectorsFormat)
			return nil
		},
	}
}

// moduleVersion is the main module's version, "(devel)" in a work tree.
// The build information is parsed once: every start reads it for the root
// command's --version.
var moduleVersion = sync.OnceValue(func() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
})
