package main

import (
	"io"
	"os"
	"path/filepath"

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
	var out string
	c := &cobra.Command{
		Use:   "get REF [-o FILE]",
		Short: "Write an artifact's bytes to stdout or FILE, verified",
		Long: `Stream the bytes of the artifact REF to standard output, or to FILE with -o.
Bytes are verified against REF as they are read. With -o the file is written
under a temporary name and renamed into place only when every byte verified;
on an integrity error (exit 4) nothing is left behind. On standard output a
damaged artifact may have been partly written before the damage is detected:
the exit code tells. With --json, -o is required and a JSON summary is printed.`,
		Example: `  amduat get 00011f1d4ea7...e895e4 > hello.txt
  amduat get -o hello.txt 00011f1d4ea7...e895e4`,
		Args: rangeArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) (err error) {
			ref, err := parseRef(args[0])
			if err != nil {
				return err
			}
			toStdout := out == "" || out == "-"
			if a.jsonOut && toStdout {
				return usagef("--json needs -o FILE (standard output would carry the artifact's bytes)")
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
			if err := writeAtomic(out, rc); err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(getResult{Ref: ref, Size: hdr.Size, TypeTag: tagPtr(hdr), Output: out})
			}
			return nil
		},
	}
	c.Flags().StringVarP(&out, "output", "o", "", "write to FILE (atomically) instead of stdout")
	return c
}

// writeAtomic copies r into path through a temporary file in the same
// directory, synced and renamed into place; on any error the temporary file
// is removed and path is untouched.
func writeAtomic(path string, r io.Reader) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".amduat-*")
	if err != nil {
		return fail(exitIO, path, unwrapPathError(err))
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := io.Copy(tmp, r); err != nil {
		return failAuto(path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return fail(exitIO, path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(exitIO, path, err)
	}
	if err := tmp.Close(); err != nil {
		return fail(exitIO, path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fail(exitIO, path, unwrapPathError(err))
	}
	return nil
}
