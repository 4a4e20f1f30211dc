package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl"
)

func init() { addCommand(newHashCmd) }

type hashItem struct {
	Source  string        `json:"source"`
	Ref     asl.Reference `json:"ref"`
	Size    uint64        `json:"size"`
	TypeTag *uint32       `json:"type_tag"`
}

type hashResult struct {
	Hash      string     `json:"hash"`
	Artifacts []hashItem `json:"artifacts"`
}

// hashSource computes the reference of the artifact whose payload is the
// file src ("-": r), streaming; standard input of unknown size is spooled to
// $TMPDIR when it exceeds 4 MiB, as put does.
func hashSource(src string, r io.Reader, id asl.HashID, tag asl.TypeTag, hasTag bool) (asl.Reference, uint64, error) {
	var size int64
	if src != "-" {
		f, err := os.Open(src)
		if err != nil {
			return asl.Reference{}, 0, fail(exitIO, src, unwrapPathError(err))
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return asl.Reference{}, 0, fail(exitIO, src, unwrapPathError(err))
		}
		if st.IsDir() {
			return asl.Reference{}, 0, fail(exitUsage, src, errors.New("is a directory"))
		}
		r, size = f, st.Size()
	} else if n, ok := regularSize(r); ok {
		size = n
	} else {
		head, err := io.ReadAll(io.LimitReader(r, putStreamThreshold+1))
		if err != nil {
			return asl.Reference{}, 0, fail(exitIO, src, fmt.Errorf("reading: %w", err))
		}
		if len(head) <= putStreamThreshold {
			r, size = bytes.NewReader(head), int64(len(head))
		} else {
			tmp, release, err := createTemp("", "amduat-hash-*")
			if err != nil {
				return asl.Reference{}, 0, fail(exitIO, src, fmt.Errorf("spooling: %w", err))
			}
			defer release()
			defer tmp.Close()
			n, err := io.Copy(tmp, io.MultiReader(bytes.NewReader(head), r))
			if err == nil {
				_, err = tmp.Seek(0, io.SeekStart)
			}
			if err != nil {
				return asl.Reference{}, 0, fail(exitIO, src, fmt.Errorf("spooling: %w", err))
			}
			r, size = tmp, n
		}
	}
	h, err := asl.NewHasher(id, asl.Header{Size: uint64(size), Tag: tag, HasTag: hasTag})
	if err != nil {
		return asl.Reference{}, 0, failAuto(src, err)
	}
	n, err := io.Copy(h, r)
	if err != nil {
		return asl.Reference{}, 0, fail(exitIO, src, fmt.Errorf("reading: %w", err))
	}
	if n != size {
		return asl.Reference{}, 0, fail(exitIO, src, fmt.Errorf("read %d bytes, expected %d (did the file change?)", n, size))
	}
	ref, err := h.Sum()
	if err != nil {
		return asl.Reference{}, 0, failAuto(src, err)
	}
	return ref, uint64(size), nil
}

func newHashCmd(a *app) *cobra.Command {
	var (
		tag      typeTagValue
		hashName string
		names    bool
	)
	c := &cobra.Command{
		Use:   "hash [--type-tag N] [--hash sha256|blake3] [--names] [FILE...]",
		Short: "Print the references files would have, without storing them",
		Long: `Compute the reference of each FILE as an artifact (standard input when there is
none, or for "-") and print one per line, in input order, as put would, but
store nothing and open no store (like git hash-object without -w). --hash
defaults to sha256; --type-tag as for put. --names prints "REF NAME" lines.
JSON: {"hash", "artifacts": [{"source", "ref", "size", "type_tag"}]}.`,
		Example: `  amduat hash notes.txt
  printf hello | amduat hash
  amduat hash --type-tag 0x101 --hash blake3 program.bin`,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				args = []string{"-"}
			}
			alg, _ := asl.LookupHash(asl.HashSHA256)
			if hashName != "" {
				var err error
				if alg, err = hashFlag(hashName); err != nil {
					return err
				}
			}
			res := hashResult{Hash: alg.Short, Artifacts: []hashItem{}}
			dashes := 0
			for _, src := range args {
				if src == "-" {
					if dashes++; dashes > 1 {
						return usagef("standard input (-) can be given only once")
					}
				}
			}
			for _, src := range args {
				if err := c.Context().Err(); err != nil {
					return err
				}
				ref, size, err := hashSource(src, a.stdin, alg.ID, tag.tag, tag.set)
				if err != nil {
					return err
				}
				it := hashItem{Source: src, Ref: ref, Size: size}
				if tag.set {
					t := uint32(tag.tag)
					it.TypeTag = &t
				}
				res.Artifacts = append(res.Artifacts, it)
				if names {
					a.printf("%s %s\n", ref, src)
				} else {
					a.printf("%s\n", ref)
				}
			}
			if a.jsonOut {
				return a.printJSON(res)
			}
			return nil
		},
	}
	c.Flags().Var(&tag, "type-tag", "type tag: decimal or 0x hex (default: untagged)")
	c.Flags().StringVar(&hashName, "hash", "", "sha256 (default) or blake3")
	c.Flags().BoolVar(&names, "names", false, `print "REF NAME" lines`)
	return c
}
