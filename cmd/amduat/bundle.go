package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/bundle"
	"github.com/amduat/amduat/closure"
)

func init() {
	addCommand(newExportCmd)
	addCommand(newImportCmd)
}

// progress draws a one-line counter on stderr, at most 10 times a second,
// only when stderr is a terminal.
type progress struct {
	a    *app
	last time.Time
	on   bool
}

func (a *app) newProgress() *progress { return &progress{a: a, on: a.stderrIsTerminal()} }

func (p *progress) show(format string, args ...any) {
	if !p.on || time.Since(p.last) < 100*time.Millisecond {
		return
	}
	p.last = time.Now()
	fmt.Fprintf(p.a.stderr, "\r"+format+"\x1b[K", args...)
}

func (p *progress) done() {
	if p.on && !p.last.IsZero() {
		fmt.Fprint(p.a.stderr, "\r\x1b[K")
	}
}

type exportResult struct {
	Output      string          `json:"output"`
	Artifacts   uint64          `json:"artifacts"`
	Bytes       uint64          `json:"bytes"`
	Roots       []asl.Reference `json:"roots"`
	Absent      []asl.Reference `json:"absent"`
	Undecodable []asl.Reference `json:"undecodable"`
}

func newExportCmd(a *app) *cobra.Command {
	var (
		out      string
		withDeps bool
	)
	c := &cobra.Command{
		Use:   "export REF... [--closure] -o FILE",
		Short: "Write artifacts (and with --closure all they reach) to a bundle file",
		Long: `Write the artifacts REF... to FILE as one bundle (BUNDLE/1, SPECS.md §19): a
header, each artifact with its reference, and a trailer listing the REFs as
roots. With --closure the bundle holds everything the REFs reach (SPECS.md
§19.6: a result reaches its program, inputs, params, outputs, trace and
provenance edge; a trace its result and node outputs; an edge its ends),
breadth first; a reached reference that is not stored (the missing input of
a failed run, the scheme descriptor) is left out with a warning line.
Without --closure every REF must be stored (exit 3 otherwise).

FILE is written under a temporary name and renamed into place when complete;
-o - writes to standard output. Bytes are read verified and copied with
bounded memory. Text: "exported N artifacts (B bytes), R roots to FILE".
JSON: {"output", "artifacts", "bytes", "roots", "absent", "undecodable"}.`,
		Example: `  amduat export --closure -o run.amdb RESULT_REF
  amduat export -o two.amdb REF1 REF2`,
		Args: minArgs(1),
		RunE: func(c *cobra.Command, args []string) (err error) {
			if out == "" {
				return usagef("-o FILE is required (-o - for standard output)")
			}
			refs, err := a.parseRefs(args)
			if err != nil {
				return err
			}
			s, err := a.openStoreReadOnly()
			if err != nil {
				return err
			}
			defer closeStore(s, a.storeDir, &err)
			ctx := c.Context()
			var w io.Writer = a.stdout
			commit, abort := func() error { return nil }, func() {}
			if out != "-" {
				f, cm, ab, err := createOutput(out)
				if err != nil {
					return err
				}
				w, commit, abort = f, cm, ab
			} else if a.jsonOut {
				return usagef("--json needs -o FILE (standard output would carry the bundle)")
			}
			bw, err := bundle.NewWriter(w)
			if err != nil {
				abort()
				return fail(exitIO, out, err)
			}
			res := exportResult{Output: out, Roots: dedupe(refs), Absent: []asl.Reference{}, Undecodable: []asl.Reference{}}
			pr := a.newProgress()
			add := func(ref asl.Reference) error {
				rc, hdr, err := s.Fetch(ctx, ref)
				if err != nil {
					return refErr(ref.String(), err)
				}
				defer rc.Close()
				if err := bw.AddVerified(ref, hdr, rc); err != nil {
					return failAuto(ref.String(), err)
				}
				res.Artifacts++
				res.Bytes += hdr.Size
				pr.show("exported %d artifacts (%d bytes)", res.Artifacts, res.Bytes)
				return nil
			}
			if withDeps {
				err = closure.Walk(ctx, s, res.Roots, func(n closure.Node) error {
					if !n.Present {
						res.Absent = append(res.Absent, n.Ref)
						if !a.jsonOut {
							a.warnf(n.Ref.String(), errors.New("reached but not stored: left out of the bundle"))
						}
						return nil
					}
					if n.Undecodable != nil {
						res.Undecodable = append(res.Undecodable, n.Ref)
						a.warnf(n.Ref.String(), fmt.Errorf("exported, but its references are not followed: %w", n.Undecodable))
					}
					return add(n.Ref)
				})
				if err != nil {
					err = failAuto(a.storeDir, err)
				}
			} else {
				for _, ref := range res.Roots {
					if err = add(ref); err != nil {
						break
					}
				}
			}
			if err == nil {
				if cerr := bw.Close(res.Roots); cerr != nil {
					err = fail(exitIO, out, cerr)
				}
			}
			pr.done()
			if err != nil {
				abort()
				return err
			}
			if err := commit(); err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(res)
			}
			if out != "-" {
				a.printf("exported %d artifacts (%d bytes), %d roots to %s\n", res.Artifacts, res.Bytes, len(res.Roots), out)
			}
			return nil
		},
	}
	c.Flags().StringVarP(&out, "output", "o", "", "bundle file to write (- for standard output)")
	c.Flags().BoolVar(&withDeps, "closure", false, "also export everything the REFs reach")
	return c
}

func dedupe(refs []asl.Reference) []asl.Reference {
	seen := map[asl.Reference]bool{}
	out := make([]asl.Reference, 0, len(refs))
	for _, r := range refs {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

// maxRootLines bounds the "root REF" lines import prints per bundle.
const maxRootLines = 10

type importFile struct {
	Input     string          `json:"input"`
	Artifacts uint64          `json:"artifacts"`
	Bytes     uint64          `json:"bytes"`
	Roots     []asl.Reference `json:"roots"`
}

type importResult struct {
	Files []importFile `json:"files"`
}

func newImportCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "import FILE...",
		Short: "Store the artifacts of bundle files, verifying every reference",
		Long: `Read each bundle FILE (BUNDLE/1, SPECS.md §19; "-" for standard input) and
store its artifacts under their references, each checked as it is read: an
artifact whose bytes do not hash to its reference is never stored. Small
artifacts go through the batch path, large ones stream, so memory stays
bounded. A damaged or truncated bundle stops the import with exit 4 and a
line naming the entry (index and reference), the field and the byte offset;
the artifacts before it, all verified, stay stored. An unregistered hash or
bundle version is exit 5.

Text per FILE: "imported N artifacts (B bytes) from FILE, R roots", then
"root REF" per root when there are at most 10 (--json lists them all). JSON: {"files": [{"input", "artifacts", "bytes", "roots"}]}.`,
		Args: minArgs(1),
		RunE: func(c *cobra.Command, args []string) (err error) {
			s, err := a.openStore()
			if err != nil {
				return err
			}
			defer closeStore(s, a.storeDir, &err)
			res := importResult{Files: []importFile{}}
			pr := a.newProgress()
			defer pr.done()
			for _, in := range args {
				var r io.Reader = a.stdin
				if in != "-" {
					f, err := os.Open(in)
					if err != nil {
						return fail(exitIO, in, unwrapPathError(err))
					}
					defer f.Close()
					r = f
				}
				opt := bundle.ImportOptions{Progress: func(st bundle.ImportStats) {
					pr.show("%s: imported %d artifacts (%d bytes)", in, st.Stored, st.Bytes)
				}}
				if !isRemote(a.storeDir) {
					// A server refuses index writes (§18.5); its traces and
					// edges are then found by scanning.
					opt.IndexEntries = closure.IndexEntries
				}
				st, err := bundle.Import(c.Context(), s, r, opt)
				if err != nil {
					if st.Stored > 0 {
						err = fmt.Errorf("%w (%d artifacts before it were verified and stored)", err, st.Stored)
					}
					return failAuto(in, err)
				}
				pr.done()
				res.Files = append(res.Files, importFile{Input: in, Artifacts: st.Stored, Bytes: st.Bytes, Roots: append([]asl.Reference{}, st.Roots...)})
				a.printf("imported %d artifacts (%d bytes) from %s, %d roots\n", st.Stored, st.Bytes, in, len(st.Roots))
				if len(st.Roots) <= maxRootLines {
					for _, r := range st.Roots {
						a.printf("root %s\n", r)
					}
				}
			}
			if a.jsonOut {
				return a.printJSON(res)
			}
			return nil
		},
	}
}

// getBatch is get --stdin: the artifacts named on standard input, one
// reference per line, written as one bundle (roots: the references, in
// input order) to out ("" or "-": standard output).
func (a *app) getBatch(out string) (err error) {
	var w io.Writer = a.stdout
	commit, abort := func() error { return nil }, func() {}
	toStdout := out == "" || out == "-"
	if a.jsonOut && toStdout {
		return usagef("--json needs -o FILE (standard output would carry the bundle)")
	}
	if !toStdout {
		f, cm, ab, err := createOutput(out)
		if err != nil {
			return err
		}
		w, commit, abort = f, cm, ab
	}
	s, err := a.openStoreReadOnly()
	if err != nil {
		abort()
		return err
	}
	defer closeStore(s, a.storeDir, &err)
	bw, err := bundle.NewWriter(w)
	if err != nil {
		abort()
		return fail(exitIO, out, err)
	}
	res := exportResult{Output: out, Roots: []asl.Reference{}, Absent: []asl.Reference{}, Undecodable: []asl.Reference{}}
	err = eachLine(a.stdin, func(line string) error {
		ref, err := a.parseRefIn(s, line)
		if err != nil {
			return err
		}
		rc, hdr, err := s.Fetch(a.context(), ref)
		if err != nil {
			return refErr(line, err)
		}
		defer rc.Close()
		if err := bw.AddVerified(ref, hdr, rc); err != nil {
			return failAuto(line, err)
		}
		res.Roots = append(res.Roots, ref)
		res.Artifacts++
		res.Bytes += hdr.Size
		return nil
	})
	if err == nil {
		if cerr := bw.Close(res.Roots); cerr != nil {
			err = fail(exitIO, out, cerr)
		}
	}
	if err != nil {
		abort()
		return err
	}
	if err := commit(); err != nil {
		return err
	}
	if a.jsonOut {
		return a.printJSON(res)
	}
	return nil
}
