package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl"
)

func init() { addCommand(newGetCmd) }

type getResult struct {
	Ref     asl.Reference `json:"ref"`
	Size    uint64        `json:"size"`
	TypeTag *uint32       `json:"type_tag"`
	Output  string        `json:"output"`
}

func tagPtr(h asl.Header) *uint32 {
	if !h.HasTag {
		return nil
	}
	t := uint32(h.Tag)
	return &t
}

func newGetCmd(a *app) *cobra.Command {
	var (
		out              string
		stdin            bool
		recursive, force bool
	)
	c := &cobra.Command{
		Use:   "get REF [-o FILE] | get -r TREE -o DIR [--force] | get --stdin [-o FILE]",
		Short: "Write an artifact's bytes to stdout or FILE, verified",
		Long: `Stream the bytes of the artifact REF to standard output, or to FILE with -o.
Bytes are verified against REF as they are read. With -o the file is written
under a temporary name and renamed into place only when every byte verified;
on an integrity error (exit 4) nothing is left behind. On standard output a
damaged artifact may have been partly written before the damage is detected:
the exit code tells. With --json, -o is required and a JSON summary is printed.

--stdin reads references from standard input, one per line, and writes one
bundle (BUNDLE/1, SPECS.md §19: each artifact framed with its reference,
the references as roots) to stdout or FILE; "amduat import" reads it back. A
reference that is not stored stops the stream (exit 3) before the trailer,
so a reader sees it is incomplete.

REF may be TREE:path, a path inside a directory stored by put -r (TREE is
the tree's reference, full or abbreviated): "get $tree:src/main.go".

-r TREE -o DIR restores a directory stored by put -r into DIR (created if
missing): files with mode 0644, or 0755 when executable, each verified
against its reference; symbolic links as links (created last); empty
directories too. No path is written outside DIR, whatever links DIR or the
tree hold. Anything already at a path the tree writes is refused (exit 1,
before anything is written) unless --force, which replaces files and links
(never directories). With --json a summary {"ref","output","files",
"directories","symlinks","bytes"} is printed.`,
		Example: `  amduat get 00011f1d4ea7...e895e4 > hello.txt
  amduat get -o hello.txt 00011f1d4ea7...e895e4
  amduat get -r "$tree" -o restored/
  amduat get "$tree:docs/README.md"`,
		Args: func(c *cobra.Command, args []string) error {
			if stdin {
				return stdinArgs(&stdin)(c, args)
			}
			if recursive && (out == "" || out == "-") {
				return usagef("-r needs -o DIR, the directory to restore into")
			}
			return rangeArgs(1, 1)(c, args)
		},
		RunE: func(c *cobra.Command, args []string) (err error) {
			if stdin {
				return a.getBatch(out)
			}
			if recursive {
				return a.restoreTree(c.Context(), args[0], out, force)
			}
			if force {
				return usagef("--force applies to get -r")
			}
			ref, err := a.parseRef(args[0])
			if err != nil {
				return err
			}
			toStdout := out == "" || out == "-"
			if a.jsonOut && toStdout {
				return usagef("--json needs -o FILE (standard output would carry the artifact's bytes)")
			}
			if !toStdout {
				if err := checkOutputPath(out); err != nil {
					return err
				}
			}
			s, err := a.openStoreReadOnly()
			if err != nil {
				return err
			}
			defer closeStore(s, a.storeDir, &err)
			rc, hdr, err := s.Fetch(c.Context(), ref)
			if err != nil {
				return refErr(args[0], err)
			}
			defer rc.Close()
			if toStdout {
				if _, err := io.Copy(a.stdout, rc); err != nil {
					return refErr(args[0], err)
				}
				return nil
			}
			if err := writeOutput(c.Context(), out, rc); err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(getResult{Ref: ref, Size: hdr.Size, TypeTag: tagPtr(hdr), Output: out})
			}
			return nil
		},
	}
	c.Flags().StringVarP(&out, "output", "o", "", "write to FILE instead of stdout: a regular file is replaced atomically, a symlink is written through, a device or FIFO is written in place")
	c.Flags().BoolVar(&stdin, "stdin", false, "read references from standard input and write them as one bundle")
	c.Flags().BoolVarP(&recursive, "recursive", "r", false, "restore the directory TREE into DIR (-o)")
	c.Flags().BoolVar(&force, "force", false, "with -r: replace files and symbolic links already in DIR")
	return c
}
