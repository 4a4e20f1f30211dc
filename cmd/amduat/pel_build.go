package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/report"
)

func init() { addPELCommand(newPELBuildCmd) }

// maxProgramJSON bounds the JSON program text pel build reads.
const maxProgramJSON = 256 << 20

func newPELBuildCmd(a *app) *cobra.Command {
	var (
		hashName     string
		strict       bool
		allowInvalid bool
	)
	c := &cobra.Command{
		Use:   "build FILE.json | - [--allow-invalid]",
		Short: "Store a program written in the JSON program format",
		Long: `Parse FILE (or standard input for "-") in the JSON program format
(SPECS.md §15), encode it as ProgramBytes, store it as a program artifact
(type tag 0x00000101) and print its reference.

  {"nodes":[
    {"id":1,"op":"pel.bytes.const","version":1,"params":{"text":"hello"}},
    {"id":2,"op":"pel.bytes.concat","version":1,"inputs":[{"node":1,"output":0},{"input":0}]}
  ],"roots":[{"node":2,"output":0}]}

Text that is not JSON, or not the program format, is a usage error (exit 2);
JSON syntax and type errors name FILE:LINE:COLUMN. A program that encodes but
is not valid for the operations this binary knows (the kernel's and
amduat.wasm.run: unknown operation, wrong input count, undecodable params,
cycles, dangling references) can never run OK here: it is refused (exit 2,
nothing stored, the problem named). --allow-invalid stores it anyway (for
conformance vectors, for operations another implementation knows, to run and
inspect the INVALID_PROGRAM result): build then prints one warning line on
stderr, and --json reports "valid":false and the "problem". Output indexes (of node inputs and roots)
are not checked: how many outputs a node has is known only when it runs, so a
program naming an output a node lacks builds as valid and ends INVALID_PROGRAM
(exit 12) when run.

Errors in the JSON name FILE:LINE:COLUMN and the member, in JSON terms
("member \"nodes.id\": want an integer in [0, 4294967295], got a string").`,
		Example: `  amduat pel build prog.json
  amduat --json pel show REF > prog.json && amduat pel build prog.json`,
		Args: rangeArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) (err error) {
			src := args[0]
			reg, done, err := staticOps(c.Context())
			if err != nil {
				return err
			}
			defer done()
			// The program is encoded as its JSON is read and checked from
			// its bytes, so neither the text nor a Program value is held
			// (SPECS.md §14.11); any other text is read whole and parsed
			// again, for the same bytes or the error with its position.
			b, nodes, roots, ok := a.streamProgramJSON(src, reg)
			if !ok {
				data, err := a.readProgramJSON(src)
				if err != nil {
					return err
				}
				if b, nodes, roots, err = pel.ProgramBytesFromJSON(data, reg); err != nil {
					return usageErr(jsonErrorAt(src, data, err))
				}
			}
			art := asl.Tagged(asl.TagPELProgramDAG1, b)
			res := buildReport(art, nodes, roots, reg)
			if !allowInvalid && !res.Valid {
				return usageErr(fmt.Errorf("%s: not stored: Exec_DAG would report INVALID_PROGRAM: %s (--allow-invalid stores it anyway)", src, res.Problem))
			}
			if res.Ref, err = a.storeProgram(c.Context(), hashName, src, art); err != nil {
				return err
			}
			ref := res.Ref
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
	c.Flags().BoolVar(&allowInvalid, "allow-invalid", false, "store a program that can never run OK here (unknown operation, cycle, …) with a warning instead of refusing it (exit 2)")
	c.Flags().BoolVar(&strict, "strict", true, "refuse a program that can never run OK (the default; kept for scripts)")
	_ = c.Flags().MarkHidden("strict")
	return c
}

// buildReport is report.NewBuild for a program known by its artifact and
// its counts: the same validity and problem text, checked from the bytes.
func buildReport(art asl.Artifact, nodes, roots int, reg *opreg.Registry) report.Build {
	b := report.Build{Size: uint64(len(art.Bytes)), TypeTag: uint32(art.Tag), Nodes: nodes, Roots: roots, Valid: true}
	if _, err := pel.PrepareBytes(art.Bytes, reg); err != nil {
		b.Valid, b.Problem = false, strings.Join(strings.Fields(err.Error()), " ")
	}
	return b
}

// streamProgramJSON encodes the JSON program in the regular file src as it
// reads it (pel.ProgramBytesFromJSONReader); ok is false for standard
// input, a file above maxProgramJSON, or text it leaves to the whole read.
func (a *app) streamProgramJSON(src string, reg *opreg.Registry) (b []byte, nodes, roots int, ok bool) {
	if src == "-" {
		return nil, 0, 0, false
	}
	f, err := os.Open(src)
	if err != nil {
		return nil, 0, 0, false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() > maxProgramJSON {
		return nil, 0, 0, false
	}
	return pel.ProgramBytesFromJSONReader(bufio.NewReaderSize(io.LimitReader(f, maxProgramJSON+1), 64<<10), int(st.Size()/2), reg)
}

func (a *app) readProgramJSON(src string) ([]byte, error) {
	return a.readFileLimited(src, maxProgramJSON, "JSON program")
}

// readFileLimited reads FILE, or standard input for "-", whole: a file of
// more than max bytes is a usage error naming what it should be.
func (a *app) readFileLimited(src string, max int64, what string) ([]byte, error) {
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
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, fail(exitIO, src, fmt.Errorf("reading: %w", unwrapPathError(err)))
	}
	if int64(len(data)) > max {
		return nil, fail(exitUsage, src, fmt.Errorf("%s larger than %d bytes", what, max))
	}
	return data, nil
}

// jsonErrorAt describes a JSON program error in user terms (no Go type
// names) and prefixes it with src:LINE:COLUMN: at the byte offset the
// decoder reports, else at the first occurrence of the member it names.
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
	msg, member := plainJSONError(err.Error())
	nested := errors.As(err, &te) && strings.Contains(msg, "params")
	if (off < 0 || nested) && member != "" {
		if i := bytes.Index(data, []byte(`"`+member+`"`)); i >= 0 {
			off = int64(i) + 1
		}
	}
	if off < 0 {
		off = nodeOffset(data, msg)
	}
	if off < 0 || off > int64(len(data)) {
		return fmt.Errorf("%s: %s", src, msg)
	}
	line, col := lineCol(data, int(off))
	return fmt.Errorf("%s:%d:%d (byte offset %d): %s", src, line, col, off, msg)
}

// The regular expressions below are compiled on first use: only pel build
// needs them, and every command would pay for them at package init.
var reNodeErr = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(duplicate node id|node) (\d+)\b`) })

// nodeOffset locates an error about a node ("node N: ...", "duplicate node
// id N") at the node's "id" member (for a duplicate, the second one), or
// returns -1.
func nodeOffset(data []byte, msg string) int64 {
	m := reNodeErr().FindStringSubmatch(msg)
	if m == nil {
		return -1
	}
	ids := regexp.MustCompile(`"id"\s*:\s*`+m[2]+`\b`).FindAllIndex(data, 2)
	k := 0
	if m[1] == "duplicate node id" {
		k = 1
	}
	if len(ids) <= k {
		return -1
	}
	return int64(ids[k][0]) + 1
}

var (
	reTypeErr = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`json: cannot unmarshal (\w+)(?: \S+)? into Go (?:struct field \w+\.([\w.]+)|value) of type ([\w\[\]*.]+)`)
	})
	reUnknownErr = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`json: unknown field "([^"]*)"`) })
)

// plainJSONError rewrites encoding/json's messages, which name Go types,
// in terms of the JSON program format; it also returns the member named.
func plainJSONError(msg string) (string, string) {
	member := ""
	msg = reTypeErr().ReplaceAllStringFunc(msg, func(m string) string {
		g := reTypeErr().FindStringSubmatch(m)
		want := jsonTypeName(g[3])
		got := g[1]
		switch got {
		case "number", "string", "array", "object":
			got = "a " + got
			if g[1] == "array" || g[1] == "object" {
				got = "an " + g[1]
			}
		case "bool":
			got = "true or false"
		}
		if g[2] == "" {
			return fmt.Sprintf("want %s, got %s", want, got)
		}
		path := g[2]
		if i := strings.LastIndexByte(path, '.'); i >= 0 {
			member = path[i+1:]
		} else {
			member = path
		}
		return fmt.Sprintf("member %q: want %s, got %s", path, want, got)
	})
	msg = reUnknownErr().ReplaceAllStringFunc(msg, func(m string) string {
		member = reUnknownErr().FindStringSubmatch(m)[1]
		return fmt.Sprintf("unknown member %q", member)
	})
	msg = strings.ReplaceAll(msg, "invalid params: ", "")
	return msg, member
}

func jsonTypeName(goType string) string {
	switch strings.TrimLeft(goType, "*") {
	case "uint8":
		return "an integer in [0, 255]"
	case "uint16":
		return "an integer in [0, 65535]"
	case "uint32":
		return "an integer in [0, 4294967295]"
	case "uint64", "uint":
		return "a non-negative integer"
	case "int", "int64", "int32":
		return "an integer"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	}
	if strings.HasPrefix(goType, "[]") {
		return "an array"
	}
	return "an object"
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
