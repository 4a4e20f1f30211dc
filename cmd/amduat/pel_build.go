package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/report"
)

func init() { addPELCommand(newPELBuildCmd) }

// maxProgramJSON bounds the JSON program text pel build reads.
const maxProgramJSON = 256 << 20

func newPELBuildCmd(a *app) *cobra.Command {
	var hashName string
	c := &cobra.Command{
		Use:   "build FILE.json | -",
		Short: "Store a program written in the JSON program format",
		Long: `Parse FILE (or standard input for "-") in the JSON program format
(SPECS.md §15), encode it as ProgramBytes, store it as a program artifact
(type tag 0x00000101) and print its reference.

  {"nodes":[
    {"id":1,"op":"pel.bytes.const","version":1,"params":{"text":"hello"}},
    {"id":2,"op":"pel.bytes.concat","version":1,"inputs":[{"node":1,"output":0},{"input":0}]}
  ],"roots":[{"node":2,"output":0}]}

Text that is not JSON, or not the program format, is a usage error (exit 2);
JSON syntax and type errors name FILE:LINE:COLUMN. Programs that encode but
are not valid for the kernel operations (unknown operation, wrong input count,
undecodable params, cycles, dangling references) are stored anyway, so that
invalid programs can be run and inspected; build then prints one warning line
on stderr, and --json reports "valid":false and the "problem".`,
		Example: `  amduat pel build prog.json
  amduat --json pel show REF > prog.json && amduat pel build prog.json`,
		Args: rangeArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) (err error) {
			src := args[0]
			data, err := a.readProgramJSON(src)
			if err != nil {
				return err
			}
			p, err := pel.ProgramFromJSON(data, nil)
			if err != nil {
				return usageErr(jsonErrorAt(src, data, err))
			}
			art, err := pel.ProgramArtifact(p)
			if err != nil {
				return usageErr(fmt.Errorf("%s: %w", src, err))
			}
			ref, err := a.storeProgram(c.Context(), hashName, src, art)
			if err != nil {
				return err
			}
			res := report.NewBuild(ref, art, p)
			if !res.Valid {
				a.warnf(src, fmt.Errorf("warning: stored, but Exec_DAG will report INVALID_PROGRAM: %s", res.Problem))
			}
			if a.jsonOut {
				return a.printJSON(res)
			}
			a.printf("%s\n", ref)
			return nil
		},
	}
	c.Flags().StringVar(&hashName, "hash", "", "hash for the program artifact: sha256 or blake3 (default: the store's)")
	return c
}

func (a *app) readProgramJSON(src string) ([]byte, error) {
	var r io.Reader = a.stdin
	if src != "-" {
		f, err := os.Open(src)
		if err != nil {
			return nil, fail(exitIO, src, unwrapPathError(err))
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.IsDir() {
			return nil, fail(exitUsage, src, errors.New("is a directory"))
		}
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxProgramJSON+1))
	if err != nil {
		return nil, fail(exitIO, src, fmt.Errorf("reading: %w", unwrapPathError(err)))
	}
	if len(data) > maxProgramJSON {
		return nil, fail(exitUsage, src, fmt.Errorf("JSON program larger than %d bytes", maxProgramJSON))
	}
	return data, nil
}

// jsonErrorAt prefixes err with src:LINE:COLUMN when it carries a byte
// offset into data (JSON syntax and type errors).
func jsonErrorAt(src string, data []byte, err error) error {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	}
	if off < 0 || off > int64(len(data)) {
		return fmt.Errorf("%s: %w", src, err)
	}
	line, col := lineCol(data, int(off))
	return fmt.Errorf("%s:%d:%d (byte offset %d): %w", src, line, col, off, err)
}

// lineCol converts a byte offset into 1-based line and column (in bytes).
// A JSON error offset counts the bytes read, including the offending one,
// so the column names that byte.
func lineCol(data []byte, off int) (line, col int) {
	if off > len(data) {
		off = len(data)
	}
	pos := off - 1
	if pos < 0 {
		pos = 0
	}
	before := data[:pos]
	line = 1 + bytes.Count(before, []byte("\n"))
	col = pos - bytes.LastIndexByte(before, '\n')
	return line, col
}

// storeProgram stores a program artifact in the --store store under --hash
// (default: the store's hash) and returns its reference; subject names the
// program's source in errors.
func (a *app) storeProgram(ctx context.Context, hashName, subject string, art asl.Artifact) (ref asl.Reference, err error) {
	s, err := a.openStore()
	if err != nil {
		return asl.Reference{}, err
	}
	defer closeStore(s, a.storeDir, &err)
	id, err := a.pelHash(hashName, s.DefaultHash())
	if err != nil {
		return asl.Reference{}, err
	}
	ref, err = asl.PutArtifact(ctx, s, id, art)
	if err != nil {
		return asl.Reference{}, failAuto(subject, err)
	}
	return ref, nil
}
