package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/aslutil"
)

func init() {
	addCommand(newHasCmd)
	addCommand(newStatCmd)
}

type hasItem struct {
	Ref     asl.Reference `json:"ref"`
	Present bool          `json:"present"`
}

type hasResult struct {
	Refs       []hasItem `json:"refs"`
	AllPresent bool      `json:"all_present"`
}

func newHasCmd(a *app) *cobra.Command {
	var stdin bool
	c := &cobra.Command{
		Use:   "has REF... | --stdin",
		Short: "Tell whether artifacts are stored (exit 0 if all, 1 if any is missing)",
		Long: `Print "REF present" or "REF missing" for each REF, and exit 0 when every REF is
stored, 1 when any is missing. Presence is read from the store's index; the
bytes are not read (use verify for that).

--stdin reads the references from standard input, one per line, and answers
each as it is read (JSON: one object per line, {"ref","present"}; a line that
is not a reference gets an error line and the batch goes on, exit 2 at the
end).`,
		Args: stdinArgs(&stdin),
		RunE: func(c *cobra.Command, args []string) (err error) {
			if stdin {
				return a.hasBatch()
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
			res := hasResult{Refs: make([]hasItem, 0, len(refs)), AllPresent: true}
			for i, ref := range refs {
				ok, err := asl.Has(c.Context(), s, ref)
				if err != nil {
					return refErr(args[i], err)
				}
				res.Refs = append(res.Refs, hasItem{ref, ok})
				res.AllPresent = res.AllPresent && ok
				state := "present"
				if !ok {
					state = "missing"
				}
				a.printf("%s %s\n", ref, state)
			}
			if a.jsonOut {
				if err := a.printJSON(res); err != nil {
					return err
				}
			}
			if !res.AllPresent {
				return exitStatus(exitNegative)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&stdin, "stdin", false, "read references from standard input, one per line")
	return c
}

type statItem struct {
	Ref         asl.Reference `json:"ref"`
	Size        uint64        `json:"size"`
	TypeTag     *uint32       `json:"type_tag"`
	StoredSize  int64         `json:"stored_size"`
	Compression string        `json:"compression"`
}

type statResult struct {
	Artifacts []any `json:"artifacts"`
}

func newStatCmd(a *app) *cobra.Command {
	var stdin bool
	c := &cobra.Command{
		Use:   "stat REF... | --stdin",
		Short: "Show size, type tag, stored size and compression of artifacts",
		Long: `Print one line per REF:

  REF size=N type_tag=0xHHHHHHHH|none stored_size=N compression=none|zstd|mixed

size is the payload length, stored_size the bytes the store keeps after
compression (-1 if the backend cannot tell). Every REF is reported: one that
fails (not stored, damaged index) gets an error line on stderr and the others
are still printed; the exit code is the first failure's (3 when not stored).
JSON: failures appear in "artifacts" as {"ref", "error", "code"}. Bytes are
not read or verified (use verify).

--stdin reads the references from standard input, one per line, and prints
"REF missing" on stdout for one that is not stored (as git cat-file
--batch-check does) and goes on; exit 3 at the end if any was missing. JSON:
one object per line (the stat object, or {"ref","missing":true}).`,
		Args: stdinArgs(&stdin),
		RunE: func(c *cobra.Command, args []string) (err error) {
			if stdin {
				return a.statBatch()
			}
			for _, arg := range args {
				if _, err := asl.ParseReference(arg); err != nil && !aslutil.IsAbbreviated(arg) {
					return badRefErr(arg, err)
				}
			}
			s, err := a.openStoreReadOnly()
			if err != nil {
				return err
			}
			defer closeStore(s, a.storeDir, &err)
			res := statResult{Artifacts: make([]any, 0, len(args))}
			first := 0
			for _, arg := range args {
				ref, err := a.parseRefIn(s, arg)
				if err == nil {
					var in asl.Info
					if in, err = s.Stat(c.Context(), ref); err == nil {
						in.Ref = ref
						res.Artifacts = append(res.Artifacts, statItemOf(in))
						a.printf("%s\n", statLine(in))
						continue
					}
					err = refErr(arg, err)
				}
				code := a.exitCode(err)
				if first == 0 {
					first = code
				}
				a.warnf(arg, err)
				msg := oneLine(withSubject(arg, err))
				res.Artifacts = append(res.Artifacts, statFailure{Ref: arg, Error: msg, Code: code})
			}
			if a.jsonOut {
				if err := a.printJSON(res); err != nil {
					return err
				}
			}
			if first != 0 {
				return exitStatus(first)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&stdin, "stdin", false, "read references from standard input, one per line")
	return c
}

type statFailure struct {
	Ref   string `json:"ref"`
	Error string `json:"error"`
	Code  int    `json:"code"`
}

// statLine renders one artifact's info for stat's text output.
func statLine(in asl.Info) string {
	return fmt.Sprintf("%s size=%d type_tag=%s stored_size=%d compression=%s",
		in.Ref, in.Size, in.TagString(), in.StoredSize, in.Compression)
}
