package main

import (
	"fmt"
	"io"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
)

// The `amduat pel` command group (SPECS.md §16.4):
// seed, build, show and run. Each subcommand lives in its own pel_*.go file
// and registers itself with addPELCommand.

func init() { addCommand(newPELCmd) }

var pelFactories []func(*app) *cobra.Command

// addPELCommand registers a subcommand of `amduat pel`. Call it from init
// functions.
func addPELCommand(f func(*app) *cobra.Command) { pelFactories = append(pelFactories, f) }

func newPELCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "pel",
		Short: "Store, inspect and run PEL programs (PEL/PROGRAM-DAG/1)",
		Long: `Programs are DAGs of pure operations (PEL/PROGRAM-DAG/1) stored as artifacts
tagged 0x00000101. "seed" stores a reference program, "build" stores a program
written in the JSON program format, "show" renders a program, result, trace or
scheme descriptor, and "run" executes a program by reference: it reads the
program, inputs and params from the store and stores the outputs, the result
artifact (0x00000103) and the trace artifact (0x00000102).

The operations are the kernel's (pel.bytes.const, concat, slice,
hash.asl1, params) and amduat.wasm.run, which runs a stored WebAssembly
module: your own code (see amduat wasm --help).

pel run exits with 10 + the execution status when the program does not
succeed (11 SCHEME_UNSUPPORTED, 12 INVALID_PROGRAM, 13 INVALID_INPUTS,
14 RUNTIME_FAILED); see amduat pel run --help.`,
	}
	for _, f := range pelFactories {
		c.AddCommand(f(a))
	}
	return c
}

// Exit codes of `amduat pel run` (SPECS.md §16): 10 + ExecutionStatus for
// a run whose status is not OK. The range 10-19 is reserved for them in
// exitcodes.go.
const (
	exitPELBase              = 10
	exitPELSchemeUnsupported = exitPELBase + int(pel.StatusSchemeUnsupported) // 11
	exitPELInvalidProgram    = exitPELBase + int(pel.StatusInvalidProgram)    // 12
	exitPELInvalidInputs     = exitPELBase + int(pel.StatusInvalidInputs)     // 13
	exitPELRuntimeFailed     = exitPELBase + int(pel.StatusRuntimeFailed)     // 14
)

// pelExitCode is the exit code for a run that ended with status s.
func pelExitCode(s pel.ExecutionStatus) int {
	if s == pel.StatusOK {
		return exitOK
	}
	return exitPELBase + int(s)
}

// pelExitCodeHelp is the exit-code table of `pel run`.
const pelExitCodeHelp = `Exit codes:
  0    the program ran and its status is OK
  11   SCHEME_UNSUPPORTED: --scheme names a scheme other than PEL/PROGRAM-DAG/1
  12   INVALID_PROGRAM: the program is missing, damaged, malformed or invalid
  13   INVALID_INPUTS: an input or the params is missing or damaged, or the
       program reads an input index or the global params that was not given
  14   RUNTIME_FAILED: an operation failed (e.g. slice out of range), or
       --max-nodes / --max-output-bytes was exceeded
  2    usage error: bad flag, malformed REF, conflicting output modes,
       --output-raw with a program that has not exactly one output
  3-7, 130  operational errors as for every command (amduat --help), e.g.
       6 I/O failure or --timeout exceeded, 7 no store: nothing was stored
Exit codes 11-14 mean the run is complete: its result and trace are stored.`

// printableText returns b as text when it is valid UTF-8 without control
// characters, and Go-quoted otherwise, so one diagnostic stays one line.
func printableText(b []byte) string {
	if utf8.Valid(b) {
		ok := true
		for _, r := range string(b) {
			if unicode.IsControl(r) {
				ok = false
				break
			}
		}
		if ok {
			return string(b)
		}
	}
	return strconv.Quote(string(b))
}

// writeDiagLines writes "PREFIXdiagnostic[i] code 0xCCCCCCCC MESSAGE" lines.
func writeDiagLines(w io.Writer, prefix string, ds []pel.DiagnosticEntry) {
	for i, d := range ds {
		fmt.Fprintf(w, "%sdiagnostic[%d] code 0x%08x %s\n", prefix, i, d.Code, printableText(d.Message))
	}
}

// writeRefLines writes "PREFIXNAME[i] REF" lines.
func writeRefLines(w io.Writer, prefix, name string, refs []asl.Reference) {
	for i, r := range refs {
		fmt.Fprintf(w, "%s%s[%d] %s\n", prefix, name, i, r)
	}
}

func storeFailureLine(f surf.StoreFailure) string {
	return fmt.Sprintf("store_failure phase %s input_index %d ref %s error %s", f.Phase, f.InputIndex, f.Ref, f.Error)
}

func optionalRefText(r asl.Reference, present bool) string {
	if !present {
		return "none"
	}
	return r.String()
}
